//! The process's allocator: jemalloc (see Cargo.toml), here in the library so the daemon, the test daemon and
//! the tools all run on the allocator production runs on; and its options.

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its start (its `malloc_conf` symbol; `MALLOC_CONF` in the environment still
/// overrides them). Freed pages go back to the system within about a second (`dirty_decay_ms`, default 10 s)
/// and are not kept as "muzzy" pages on the way: a series-table flush frees tens of MB at once, and with the
/// defaults they stayed resident ~10 s, on top of the next table being filled (bench: A telnet peak RSS
/// 332 -> 273 MiB). jemalloc's background threads do the purging: without them it ran inside whatever
/// allocated next, and a small query right after a large one paid for the large one's freed memory
/// (bench/RESULTS.md: q2 4-26 ms instead of ~0.5 ms after q1).
#[no_mangle]
#[used]
pub static malloc_conf: &[u8; 60] = b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0";

#[cfg(test)]
mod tests {
    extern "C" {
        /// jemalloc's control interface (linked through tikv-jemalloc-sys, unprefixed).
        fn mallctl(
            name: *const std::ffi::c_char,
            oldp: *mut std::ffi::c_void,
            oldlenp: *mut usize,
            newp: *mut std::ffi::c_void,
            newlen: usize,
        ) -> std::ffi::c_int;
    }

    /// One of jemalloc's ssize_t options.
    fn option(name: &std::ffi::CStr) -> Option<isize> {
        let mut value: isize = -2;
        let mut len = std::mem::size_of::<isize>();
        // SAFETY: `name` is NUL-terminated; `value` and `len` describe a writable isize, the options' type;
        // nothing is written (newp null).
        let rc =
            unsafe { mallctl(name.as_ptr(), (&mut value as *mut isize).cast(), &mut len, std::ptr::null_mut(), 0) };
        (rc == 0).then_some(value)
    }

    // The options reach jemalloc from the binary (a `malloc_conf` the linker dropped would leave its defaults,
    // 10000 and 0 or 10000).
    #[test]
    fn the_options_are_in_effect() {
        if std::env::var_os("MALLOC_CONF").is_some() {
            return;
        }
        assert_eq!(option(c"opt.dirty_decay_ms"), Some(1000));
        assert_eq!(option(c"opt.muzzy_decay_ms"), Some(0));
        let mut on = false;
        let mut len = std::mem::size_of::<bool>();
        // SAFETY: "background_thread" reads a bool; `on` and `len` describe one.
        let rc = unsafe {
            mallctl(c"background_thread".as_ptr(), (&mut on as *mut bool).cast(), &mut len, std::ptr::null_mut(), 0)
        };
        assert_eq!((rc, on), (0, true));
    }
}
