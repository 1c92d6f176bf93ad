#!/usr/bin/env python3
import socket, sys
# send.py PORT FILE: sends FILE's lines, then "version", reads until the version answer (everything before it done).
port, path = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
data = open(path, "rb").read()
s.sendall(data + b"version\n")
buf = b""
errs = 0
while True:
    c = s.recv(65536)
    if not c: break
    buf += c
    if b"Built on" in buf:
        break
print(buf.count(b"\n"), "answer lines;", buf[:300])
