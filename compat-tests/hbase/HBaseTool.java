// Helper of scripts/hbase-cluster, run as a single source file against the test bed's classpath (conf dir first):
//   java -cp "$DIR/conf:$(cat $DIR/hbase.cp)" compat-tests/hbase/HBaseTool.java COMMAND ...
//
// Commands:
//   setup SERVERS TIMEOUT_S   wait for SERVERS live region servers, create OpenTSDB's tables (those missing), spread
//                             the pre-split `tsdb` regions over all live servers, wait until every region is open
//   wait SERVERS TIMEOUT_S    wait for exactly SERVERS live region servers and every region of every table open on a live one
//   create-set NS...          create namespace NS and the same tables as `setup` inside it, for each NS (the compat
//                             suite's table sets on one cluster, rtsd.storage.hbase.namespace); existing ones are kept
//   truncate TABLE...         empty each TABLE (disable, truncate preserving its region boundaries, enabled again)
//   regions TABLE             one line per region: start key (hex), end key (hex), host:port of its server
//   servers                   the live region servers, one host:port a line
//   create TABLE FAMILIES [SPLIT...] [-- TABLE FAMILIES [SPLIT...]]...  create each TABLE (FAMILIES comma-separated,
//                             one version) pre-split at the SPLIT rows, wait until every region is open (rtsd-hbase's
//                             tests)
//   split TABLE ROW           split the region holding ROW at ROW; waits until both daughters are open
//   move TABLE ROW [HOST:PORT]  move the region holding ROW to HOST:PORT (default: another live server); waits,
//                             prints the new host:port
//   merge TABLE ROW1 ROW2     merge the adjacent regions holding ROW1 and ROW2; waits until one open region holds both
//   serve                     run commands read from stdin, one a line; after each one's output a line
//                             "HBaseTool: done" or "HBaseTool: failed REASON"
// Row arguments are Bytes.toBytesBinary strings (printable text, \xNN for other bytes).
//
// Tables follow OpenTSDB 2.4.1's src/create_table.sh with COMPRESSION NONE (no LZO on Maven Central), plus the rollup
// and pre-aggregate tables of the default rollup configuration rtsd documents (README "Rollups"), and rtsd's own
// table `rtsd` with the `a` families of rollup tables (README "rtsd on HBase").
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.HBaseConfiguration;
import org.apache.hadoop.hbase.HConstants;
import org.apache.hadoop.hbase.HRegionLocation;
import org.apache.hadoop.hbase.NamespaceDescriptor;
import org.apache.hadoop.hbase.ServerName;
import org.apache.hadoop.hbase.TableName;
import org.apache.hadoop.hbase.client.Admin;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptor;
import org.apache.hadoop.hbase.client.ColumnFamilyDescriptorBuilder;
import org.apache.hadoop.hbase.client.Connection;
import org.apache.hadoop.hbase.client.ConnectionFactory;
import org.apache.hadoop.hbase.client.RegionInfo;
import org.apache.hadoop.hbase.client.RegionLocator;
import org.apache.hadoop.hbase.client.TableDescriptorBuilder;
import org.apache.hadoop.hbase.io.compress.Compression;
import org.apache.hadoop.hbase.io.encoding.DataBlockEncoding;
import org.apache.hadoop.hbase.regionserver.BloomType;
import org.apache.hadoop.hbase.util.Bytes;

public class HBaseTool {
  /** `tsdb` is split before metric UIDs 2..9 (3-byte UIDs, no salt): the first metrics a test creates land in
   *  different regions, which `setup` spreads over all region servers. */
  static byte[][] tsdbSplits() {
    byte[][] splits = new byte[8][];
    for (int i = 0; i < 8; i++) {
      splits[i] = new byte[] {0, 0, (byte) (i + 2)};
    }
    return splits;
  }

  static ColumnFamilyDescriptor family(String name, boolean oneVersion) {
    ColumnFamilyDescriptorBuilder b = ColumnFamilyDescriptorBuilder.newBuilder(Bytes.toBytes(name))
        .setCompressionType(Compression.Algorithm.NONE)
        .setBloomFilterType(BloomType.ROW)
        .setDataBlockEncoding(DataBlockEncoding.DIFF);
    if (oneVersion) {
      b.setMaxVersions(1);
    }
    return b.build();
  }

  static void create(Admin admin, String table, byte[][] splits, ColumnFamilyDescriptor... families)
      throws IOException {
    TableName name = TableName.valueOf(table);
    if (admin.tableExists(name)) {
      return;
    }
    TableDescriptorBuilder b = TableDescriptorBuilder.newBuilder(name);
    for (ColumnFamilyDescriptor f : families) {
      b.setColumnFamily(f);
    }
    if (splits == null) {
      admin.createTable(b.build());
    } else {
      admin.createTable(b.build(), splits);
    }
    System.err.println("HBaseTool: created " + table);
  }

  /** OpenTSDB 2.4.1's tables and rtsd's, in namespace `ns` ("" = default), each skipped when it exists. */
  static void createTables(Admin admin, String ns) throws IOException {
    String p = ns.isEmpty() ? "" : ns + ":";
    if (!ns.isEmpty() && java.util.Arrays.stream(admin.listNamespaceDescriptors()).noneMatch(d -> d.getName().equals(ns))) {
      admin.createNamespace(NamespaceDescriptor.create(ns).build());
    }
    create(admin, p + "tsdb-uid", null, family("id", false), family("name", false));
    create(admin, p + "tsdb", tsdbSplits(), family("t", true));
    create(admin, p + "tsdb-tree", null, family("t", true));
    create(admin, p + "tsdb-meta", null, family("name", false));
    // Default rollup config: 1s raw interval (table tsdb, pre-aggregates tsdb-agg), 1m, 10m, 1h.
    for (String t : new String[] {"tsdb-agg", "tsdb-rollup-1m", "tsdb-rollup-10m", "tsdb-rollup-1h",
        "tsdb-rollup-agg-1m", "tsdb-rollup-agg-10m", "tsdb-rollup-agg-1h"}) {
      // `a`: the count/sum/min/max rtsd computes on ingest (rtsd.rollups.auto); OpenTSDB reads family `t` only.
      create(admin, p + t, null, family("t", false), family("a", true));
    }
    // rtsd's own table (README "rtsd on HBase"): settings, the series index, rollup marks, Chukwa stream state,
    // the nodes' series logs.
    create(admin, p + "rtsd", null, family("meta", true), family("series", true), family("rollup_dirty", true),
        family("chukwa_streams", true), family("log", true));
    // Chukwa's own tables (its core/conf/hbase.schema), which rtsd's Chukwa collector port writes.
    create(admin, p + "chukwa", null, family("t", true), family("a", true));
    create(admin, p + "chukwa_meta", null, family("k", true), family("c", true));
  }

  static Set<ServerName> liveServers(Admin admin) throws IOException {
    return new HashSet<>(admin.getRegionServers());
  }

  /** Waits for `want` live region servers; `exact`: no more either (a killed one has left, its session expired). */
  static void waitServers(Admin admin, int want, boolean exact, long deadline) throws Exception {
    while (true) {
      int live = liveServers(admin).size();
      if (exact ? live == want : live >= want) {
        return;
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("only " + live + " of " + want + " region servers are live");
      }
      Thread.sleep(500);
    }
  }

  /** Every region of every table (hbase:meta included) is open on a live server and nothing is in transition. */
  static String notReady(Connection conn, Admin admin) throws IOException {
    Set<ServerName> live = liveServers(admin);
    int rit = admin.getClusterMetrics().getRegionStatesInTransition().size();
    if (rit > 0) {
      return rit + " regions in transition";
    }
    List<TableName> tables = new ArrayList<>();
    tables.add(TableName.META_TABLE_NAME);
    for (TableName t : admin.listTableNames()) {
      tables.add(t);
    }
    for (TableName t : tables) {
      if (!admin.isTableAvailable(t)) {
        return t + " not available";
      }
      try (RegionLocator loc = conn.getRegionLocator(t)) {
        for (HRegionLocation l : loc.getAllRegionLocations()) {
          if (l == null || l.getServerName() == null || !live.contains(l.getServerName())) {
            return t + " has a region without a live server: " + l;
          }
        }
      }
    }
    return null;
  }

  static void waitReady(Connection conn, Admin admin, long deadline) throws Exception {
    String why;
    while ((why = notReadySafe(conn, admin)) != null) {
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("regions not all open: " + why);
      }
      Thread.sleep(500);
    }
  }

  static String notReadySafe(Connection conn, Admin admin) {
    try {
      return notReady(conn, admin);
    } catch (IOException e) {
      return e.toString();
    }
  }

  /** Moves `tsdb` regions round-robin over the live servers unless every live server already holds some. */
  static void spread(Connection conn, Admin admin) throws Exception {
    TableName tsdb = TableName.valueOf("tsdb");
    List<ServerName> servers = new ArrayList<>(liveServers(admin));
    servers.sort(null);
    Set<ServerName> holding = new HashSet<>();
    List<HRegionLocation> locs;
    try (RegionLocator loc = conn.getRegionLocator(tsdb)) {
      locs = loc.getAllRegionLocations();
    }
    for (HRegionLocation l : locs) {
      holding.add(l.getServerName());
    }
    if (holding.containsAll(servers)) {
      return;
    }
    for (int i = 0; i < locs.size(); i++) {
      RegionInfo r = locs.get(i).getRegion();
      ServerName to = servers.get(i % servers.size());
      if (!to.equals(locs.get(i).getServerName())) {
        admin.move(r.getEncodedNameAsBytes(), to);
      }
    }
    System.err.println("HBaseTool: moved tsdb regions round-robin over " + servers.size() + " servers");
  }

  static String regions(Connection conn, String table) throws IOException {
    StringBuilder out = new StringBuilder();
    try (RegionLocator loc = conn.getRegionLocator(TableName.valueOf(table))) {
      for (HRegionLocation l : loc.getAllRegionLocations()) {
        RegionInfo r = l.getRegion();
        ServerName s = l.getServerName();
        out.append(hex(r.getStartKey())).append(' ').append(hex(r.getEndKey())).append(' ')
            .append(s == null ? "-" : s.getHostname() + ":" + s.getPort()).append('\n');
      }
    }
    return out.toString();
  }

  interface Step {
    String run() throws Exception;
  }

  static String retry(long deadline, Step step) throws Exception {
    while (true) {
      try {
        return step.run();
      } catch (IOException e) {
        if (System.currentTimeMillis() > deadline) {
          throw e;
        }
        System.err.println("HBaseTool: retrying after " + e.toString().split("\n")[0]);
        Thread.sleep(2000);
      }
    }
  }

  static HRegionLocation locate(Connection conn, String table, byte[] row) throws IOException {
    try (RegionLocator loc = conn.getRegionLocator(TableName.valueOf(table))) {
      return loc.getRegionLocation(row, true);
    }
  }

  /** {@link #locate} while a split, move or merge is under way: null while meta lists the region without a server
   *  (NoServerForRegionException: a daughter not yet assigned) or the lookup fails otherwise; the caller waits. */
  static HRegionLocation locateChanging(Connection conn, String table, byte[] row) {
    try {
      return locate(conn, table, row);
    } catch (IOException e) {
      System.err.println("HBaseTool: waiting after " + e.toString().split("\n")[0]);
      return null;
    }
  }

  /** Splits the region holding `row` at `row` and waits until a region starting at `row` is open and the region
   *  holding the row before it ends there. */
  static void split(Connection conn, Admin admin, String table, byte[] row, long deadline) throws Exception {
    TableName name = TableName.valueOf(table);
    admin.split(name, row);
    while (true) {
      HRegionLocation at = locateChanging(conn, table, row);
      if (at != null && Bytes.equals(at.getRegion().getStartKey(), row) && at.getServerName() != null
          && notReadySafe(conn, admin) == null) {
        return;
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("split of " + table + " at " + Bytes.toStringBinary(row) + " not done");
      }
      Thread.sleep(200);
    }
  }

  /** Moves the region holding `row` to `to` (null: the first other live server); returns where it went. */
  static String move(Connection conn, Admin admin, String table, byte[] row, String to, long deadline)
      throws Exception {
    HRegionLocation from = locate(conn, table, row);
    ServerName dest = null;
    List<ServerName> servers = new ArrayList<>(liveServers(admin));
    servers.sort(null);
    for (ServerName s : servers) {
      String hp = s.getHostname() + ":" + s.getPort();
      if (to == null ? !s.equals(from.getServerName()) : hp.equals(to)) {
        dest = s;
        break;
      }
    }
    if (dest == null) {
      throw new IllegalStateException("no destination server " + to + " among " + servers);
    }
    admin.move(from.getRegion().getEncodedNameAsBytes(), dest);
    while (true) {
      HRegionLocation now = locateChanging(conn, table, row);
      if (now != null && dest.equals(now.getServerName()) && notReadySafe(conn, admin) == null) {
        return dest.getHostname() + ":" + dest.getPort();
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("move of " + from.getRegion().getEncodedName() + " not done");
      }
      Thread.sleep(200);
    }
  }

  static String hex(byte[] b) {
    return b.length == 0 ? "-" : Bytes.toHex(b);
  }

  /** Merges the two adjacent regions holding `a` and `b`; waits until one open region holds both rows. */
  static void merge(Connection conn, Admin admin, String table, byte[] a, byte[] b, long deadline) throws Exception {
    HRegionLocation ra = locate(conn, table, a);
    HRegionLocation rb = locate(conn, table, b);
    admin.mergeRegionsAsync(new byte[][] {ra.getRegion().getEncodedNameAsBytes(),
        rb.getRegion().getEncodedNameAsBytes()}, false).get();
    while (true) {
      HRegionLocation now = locateChanging(conn, table, a);
      if (now != null && now.getRegion().containsRow(b) && now.getServerName() != null && notReadySafe(conn, admin) == null) {
        return;
      }
      if (System.currentTimeMillis() > deadline) {
        throw new IllegalStateException("merge of " + ra.getRegion().getEncodedName() + " not done");
      }
      Thread.sleep(200);
    }
  }

  /** Runs one command; returns what it prints. */
  static String command(Connection conn, Admin admin, String[] args) throws Exception {
    StringBuilder out = new StringBuilder();
    long twoMinutes = System.currentTimeMillis() + 120000;
    switch (args[0]) {
      case "setup": {
        int servers = Integer.parseInt(args[1]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[2]) * 1000;
        // Every step is idempotent; a master still initializing (PleaseHoldException) or a region in motion
        // makes the whole sequence start over until the deadline.
        out.append(retry(deadline, () -> {
          waitServers(admin, servers, false, deadline);
          waitReady(conn, admin, deadline);
          createTables(admin, "");
          waitReady(conn, admin, deadline);
          spread(conn, admin);
          waitReady(conn, admin, deadline);
          return regions(conn, "tsdb");
        }));
        break;
      }
      case "wait": {
        int servers = Integer.parseInt(args[1]);
        long deadline = System.currentTimeMillis() + Long.parseLong(args[2]) * 1000;
        retry(deadline, () -> {
          waitServers(admin, servers, true, deadline);
          waitReady(conn, admin, deadline);
          return "";
        });
        break;
      }
      case "regions":
        out.append(regions(conn, args[1]));
        break;
      case "truncate": {
        // Empties each TABLE, keeping its regions' boundaries and its descriptor: HBase drops the table's files
        // instead of scanning past delete markers until a major compaction.
        for (int i = 1; i < args.length; i++) {
          TableName t = TableName.valueOf(args[i]);
          if (admin.isTableEnabled(t)) {
            admin.disableTable(t);
          }
          admin.truncateTable(t, true);
        }
        waitReady(conn, admin, twoMinutes);
        break;
      }
      case "create-set":
        // createTables in each namespace given (the compat suite's table sets on a shared cluster).
        for (int i = 1; i < args.length; i++) {
          createTables(admin, args[i]);
        }
        waitReady(conn, admin, twoMinutes);
        break;
      case "create": {
        // Several tables in one run (a JVM start costs seconds): groups separated by "--".
        List<java.util.concurrent.Future<Void>> pending = new ArrayList<>();
        int i = 1;
        while (i < args.length) {
          String table = args[i];
          String[] fams = args[i + 1].split(",");
          List<byte[]> splits = new ArrayList<>();
          for (i += 2; i < args.length && !args[i].equals("--"); i++) {
            splits.add(Bytes.toBytesBinary(args[i]));
          }
          i++;
          ColumnFamilyDescriptor[] cfs = new ColumnFamilyDescriptor[fams.length];
          for (int f = 0; f < fams.length; f++) {
            cfs[f] = family(fams[f], true);
          }
          TableDescriptorBuilder b = TableDescriptorBuilder.newBuilder(TableName.valueOf(table));
          for (ColumnFamilyDescriptor cf : cfs) {
            b.setColumnFamily(cf);
          }
          // All tables at once: the master creates and assigns them in parallel.
          pending.add(splits.isEmpty() ? admin.createTableAsync(b.build())
              : admin.createTableAsync(b.build(), splits.toArray(new byte[0][])));
        }
        for (java.util.concurrent.Future<Void> f : pending) {
          f.get(2, java.util.concurrent.TimeUnit.MINUTES);
        }
        waitReady(conn, admin, twoMinutes);
        break;
      }
      case "split":
        split(conn, admin, args[1], Bytes.toBytesBinary(args[2]), twoMinutes);
        break;
      case "move":
        out.append(move(conn, admin, args[1], Bytes.toBytesBinary(args[2]), args.length > 3 ? args[3] : null,
            twoMinutes)).append('\n');
        break;
      case "merge":
        merge(conn, admin, args[1], Bytes.toBytesBinary(args[2]), Bytes.toBytesBinary(args[3]), twoMinutes);
        break;
      case "servers":
        for (ServerName s : liveServers(admin)) {
          out.append(s.getHostname()).append(':').append(s.getPort()).append('\n');
        }
        break;
      default:
        throw new IllegalArgumentException("unknown command " + args[0]);
    }
    return out.toString();
  }

  public static void main(String[] args) throws Exception {
    if (args.length == 0) {
      System.err.println("usage: HBaseTool COMMAND ARGS... | serve (see the comment at the top)");
      System.exit(2);
    }
    Configuration conf = HBaseConfiguration.create();
    // Fail fast inside each call; the loops above do the waiting.
    conf.setInt(HConstants.HBASE_CLIENT_RETRIES_NUMBER, 3);
    conf.setInt(HConstants.HBASE_CLIENT_OPERATION_TIMEOUT, 60000);
    try (Connection conn = ConnectionFactory.createConnection(conf); Admin admin = conn.getAdmin()) {
      if (!args[0].equals("serve")) {
        System.out.print(command(conn, admin, args));
        return;
      }
      // One command per stdin line (space-separated arguments), its output then a status line: a test binary
      // pays for the JVM and the connection once.
      java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
      String line;
      while ((line = in.readLine()) != null) {
        if (line.isBlank()) {
          continue;
        }
        try {
          System.out.print(command(conn, admin, line.trim().split("\\s+")));
          System.out.println("HBaseTool: done");
        } catch (Exception e) {
          System.out.println("HBaseTool: failed " + e.toString().split("\n")[0]);
        }
        System.out.flush();
      }
    }
  }
}
