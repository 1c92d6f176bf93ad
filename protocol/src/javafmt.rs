//! Java renderings that leak into OpenTSDB's user-facing texts.
//!
//! OpenTSDB prints tag maps with `HashMap.toString()` (`duplicate tag: ..., tags={k=v, ...}`, `Too many tags`,
//! `bad timestamp=... tags=...`), serialises them with Jackson in `HashMap` iteration order (`/api/put?details`),
//! and prints encoded values with `Arrays.toString(byte[])`. To reproduce those texts byte for byte we model the
//! Java 8+ `HashMap` layout instead of guessing an order (spec: ingest §2.4, §2.6 row 10, §3.6).
//!
//! The model follows the documented behaviour of `java.util.HashMap` since Java 8: spread hash
//! `h ^ (h >>> 16)`, power-of-two tables starting at 16 buckets, load factor 0.75, order-preserving resize
//! splits, a chain of 9 entries in a table smaller than 64 buckets forcing a resize, and red-black "tree bins"
//! (ordered by hash, then `String.compareTo`) when a chain of 9 forms in a table of 64 or more buckets. Tree bins
//! are modelled too because their iteration order differs from insertion order and an HTTP client can send
//! arbitrarily many colliding tag keys.

use std::cmp::Ordering;

/// Buckets in a freshly allocated `HashMap` table (Java's `DEFAULT_INITIAL_CAPACITY`).
const INITIAL_CAPACITY: usize = 16;
/// A chain that grows to this many entries is treeified (or the table resized while it is small).
/// Java appends the new node first and then checks `binCount >= TREEIFY_THRESHOLD - 1`, i.e. the chain now
/// holds `TREEIFY_THRESHOLD + 1` = 9 nodes.
const TREEIFY_AT_LEN: usize = 9;
/// Below this many buckets a long chain triggers a resize instead of a tree bin (`MIN_TREEIFY_CAPACITY`).
const MIN_TREEIFY_CAPACITY: usize = 64;
/// A tree bin split by a resize turns back into a plain chain when it keeps at most this many nodes.
const UNTREEIFY_THRESHOLD: usize = 6;

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, wrapping in `i32`.
fn java_string_hash(units: &[u16]) -> i32 {
    units.iter().fold(0i32, |h, &u| h.wrapping_mul(31).wrapping_add(i32::from(u)))
}

/// `HashMap.hash()`: folds the high half into the low half because bucket indexes only use the low bits.
fn spread(h: i32) -> i32 {
    h ^ ((h as u32) >> 16) as i32
}

/// One key in the model: its first position in the caller's slice, what Java compares it by, and its links.
struct Entry {
    index: usize,
    units: Vec<u16>,
    hash: i32,
    /// The bin's `next`/`prev` chain, which is what iteration follows for chains and tree bins alike.
    next: Option<usize>,
    prev: Option<usize>,
    // Red-black links, meaningful only while the entry sits in a tree bin.
    left: Option<usize>,
    right: Option<usize>,
    parent: Option<usize>,
    red: bool,
}

/// A bucket: the head of its linked order and, for a tree bin, the red-black root (always the head in Java).
#[derive(Clone, Copy, Default)]
struct Bin {
    head: Option<usize>,
    root: Option<usize>,
}

/// Tree-bin ordering: by spread hash as a signed int, then `String.compareTo` (UTF-16 code units, then length).
/// Distinct strings never compare equal here, so Java's identity-hash tie break is never reached.
fn tree_cmp(a: &Entry, b: &Entry) -> Ordering {
    a.hash.cmp(&b.hash).then_with(|| a.units.cmp(&b.units))
}

/// A structural model of `HashMap<String, String>`: enough to know where every key lands, no values.
/// Linked orders are index links so that tree-bin insertion and root moves stay O(1), as in Java: a client can
/// send thousands of colliding tag keys and we print them in error texts.
struct JavaHashMap {
    entries: Vec<Entry>,
    table: Vec<Bin>,
    threshold: usize,
    size: usize,
}

impl JavaHashMap {
    fn new() -> Self {
        Self::with_table(INITIAL_CAPACITY)
    }

    /// `new HashMap<>(initial)`: the first table has `tableSizeFor(initial)` buckets (at least one).
    fn with_capacity(initial: usize) -> Self {
        Self::with_table(initial.max(1).next_power_of_two())
    }

    fn with_table(buckets: usize) -> Self {
        JavaHashMap { entries: Vec::new(), table: vec![Bin::default(); buckets], threshold: buckets * 3 / 4, size: 0 }
    }

    fn bucket_of(&self, hash: i32) -> usize {
        (hash as u32 as usize) & (self.table.len() - 1)
    }

    /// `put(key, value)`: a new key is linked in and may trigger treeification and/or a resize; an existing key
    /// only has its value replaced, so its position is unchanged.
    fn put(&mut self, index: usize, key: &str) {
        let units: Vec<u16> = key.encode_utf16().collect();
        let hash = spread(java_string_hash(&units));
        let id = self.entries.len();
        self.entries.push(Entry {
            index,
            units,
            hash,
            next: None,
            prev: None,
            left: None,
            right: None,
            parent: None,
            red: false,
        });
        let b = self.bucket_of(hash);
        let inserted = if self.table[b].root.is_some() { self.put_tree(b, id) } else { self.put_chain(b, id) };
        if !inserted {
            self.entries.pop();
            return;
        }
        self.size += 1;
        if self.size > self.threshold {
            self.resize();
        }
    }

    fn same_key(&self, a: usize, b: usize) -> bool {
        self.entries[a].hash == self.entries[b].hash && self.entries[a].units == self.entries[b].units
    }

    /// Appends to a plain chain unless the key is already there. Chains stay short (a 9th entry either
    /// resizes the table or turns the bin into a tree), so walking them is cheap.
    fn put_chain(&mut self, b: usize, x: usize) -> bool {
        let mut len = 0;
        let mut tail = None;
        let mut cur = self.table[b].head;
        while let Some(n) = cur {
            if self.same_key(n, x) {
                return false;
            }
            len += 1;
            tail = Some(n);
            cur = self.entries[n].next;
        }
        match tail {
            None => self.table[b].head = Some(x),
            Some(t) => {
                self.entries[t].next = Some(x);
                self.entries[x].prev = Some(t);
            }
        }
        if len + 1 >= TREEIFY_AT_LEN {
            self.treeify_bin(b);
        }
        true
    }

    /// Java's `treeifyBin`: small tables grow instead, large ones turn the chain into a tree bin.
    fn treeify_bin(&mut self, b: usize) {
        if self.table.len() < MIN_TREEIFY_CAPACITY {
            self.resize();
        } else if let Some(head) = self.table[b].head {
            self.table[b] = self.build_tree(head);
        }
    }

    /// Builds a tree bin from a linked order: each node is inserted by tree order and rebalanced; the linked
    /// order is left alone except that the final root is moved to the front.
    fn build_tree(&mut self, head: usize) -> Bin {
        let mut root = head;
        let mut cur = Some(head);
        while let Some(x) = cur {
            cur = self.entries[x].next;
            let e = &mut self.entries[x];
            e.left = None;
            e.right = None;
            e.parent = None;
            if x == head {
                e.red = false;
                continue;
            }
            let parent = self.tree_descend(root, x);
            self.attach(parent, x);
            root = self.balance_insertion(root, x);
        }
        let head = self.move_to_front(head, root);
        Bin { head: Some(head), root: Some(root) }
    }

    /// Walks down from `root` to the node under which `x` belongs (keys are known to be distinct).
    fn tree_descend(&self, root: usize, x: usize) -> usize {
        let mut p = root;
        loop {
            let next = if tree_cmp(&self.entries[x], &self.entries[p]) == Ordering::Less {
                self.entries[p].left
            } else {
                self.entries[p].right
            };
            match next {
                Some(n) => p = n,
                None => return p,
            }
        }
    }

    fn attach(&mut self, parent: usize, x: usize) {
        self.entries[x].parent = Some(parent);
        if tree_cmp(&self.entries[x], &self.entries[parent]) == Ordering::Less {
            self.entries[parent].left = Some(x);
        } else {
            self.entries[parent].right = Some(x);
        }
    }

    /// `putTreeVal`: the new node is linked right after its tree parent (not at the tail), then the possibly
    /// new root is moved to the front of the bin.
    fn put_tree(&mut self, b: usize, x: usize) -> bool {
        let (Some(root), Some(head)) = (self.table[b].root, self.table[b].head) else {
            return false;
        };
        let mut p = root;
        let parent = loop {
            let next = match tree_cmp(&self.entries[x], &self.entries[p]) {
                Ordering::Equal => return false,
                Ordering::Less => self.entries[p].left,
                Ordering::Greater => self.entries[p].right,
            };
            match next {
                Some(n) => p = n,
                None => break p,
            }
        };
        self.attach(parent, x);
        // Link x right after its parent in the bin's order.
        let after = self.entries[parent].next;
        self.entries[parent].next = Some(x);
        self.entries[x].prev = Some(parent);
        self.entries[x].next = after;
        if let Some(a) = after {
            self.entries[a].prev = Some(x);
        }
        let root = self.balance_insertion(root, x);
        let head = self.move_to_front(head, root);
        self.table[b] = Bin { head: Some(head), root: Some(root) };
        true
    }

    /// Unlinks `node` and puts it at the head of the bin's order (Java keeps the tree root in the bucket slot).
    /// Returns the new head.
    fn move_to_front(&mut self, head: usize, node: usize) -> usize {
        if head == node {
            return head;
        }
        let (prev, next) = (self.entries[node].prev, self.entries[node].next);
        if let Some(p) = prev {
            self.entries[p].next = next;
        }
        if let Some(n) = next {
            self.entries[n].prev = prev;
        }
        self.entries[head].prev = Some(node);
        self.entries[node].next = Some(head);
        self.entries[node].prev = None;
        node
    }

    fn is_red(&self, n: Option<usize>) -> bool {
        n.is_some_and(|n| self.entries[n].red)
    }

    /// Red-black insertion fix-up (the textbook algorithm, which is what Java runs); returns the new root.
    fn balance_insertion(&mut self, mut root: usize, mut x: usize) -> usize {
        self.entries[x].red = true;
        loop {
            let Some(xp) = self.entries[x].parent else {
                self.entries[x].red = false;
                return x;
            };
            if !self.entries[xp].red {
                return root;
            }
            let Some(xpp) = self.entries[xp].parent else {
                return root;
            };
            let parent_is_left = self.entries[xpp].left == Some(xp);
            let uncle = if parent_is_left { self.entries[xpp].right } else { self.entries[xpp].left };
            if let Some(u) = uncle.filter(|&u| self.is_red(Some(u))) {
                self.entries[u].red = false;
                self.entries[xp].red = false;
                self.entries[xpp].red = true;
                x = xpp;
                continue;
            }
            let (mut xp, mut xpp) = (xp, Some(xpp));
            if parent_is_left && self.entries[xp].right == Some(x) {
                x = xp;
                root = self.rotate_left(root, x);
                xp = self.entries[x].parent.unwrap_or(x);
                xpp = self.entries[xp].parent;
            } else if !parent_is_left && self.entries[xp].left == Some(x) {
                x = xp;
                root = self.rotate_right(root, x);
                xp = self.entries[x].parent.unwrap_or(x);
                xpp = self.entries[xp].parent;
            }
            self.entries[xp].red = false;
            if let Some(g) = xpp {
                self.entries[g].red = true;
                root = if parent_is_left { self.rotate_right(root, g) } else { self.rotate_left(root, g) };
            }
        }
    }

    fn rotate_left(&mut self, mut root: usize, p: usize) -> usize {
        let Some(r) = self.entries[p].right else {
            return root;
        };
        let rl = self.entries[r].left;
        self.entries[p].right = rl;
        if let Some(rl) = rl {
            self.entries[rl].parent = Some(p);
        }
        let pp = self.entries[p].parent;
        self.entries[r].parent = pp;
        match pp {
            None => {
                root = r;
                self.entries[r].red = false;
            }
            Some(pp) => {
                if self.entries[pp].left == Some(p) {
                    self.entries[pp].left = Some(r);
                } else {
                    self.entries[pp].right = Some(r);
                }
            }
        }
        self.entries[r].left = Some(p);
        self.entries[p].parent = Some(r);
        root
    }

    fn rotate_right(&mut self, mut root: usize, p: usize) -> usize {
        let Some(l) = self.entries[p].left else {
            return root;
        };
        let lr = self.entries[l].right;
        self.entries[p].left = lr;
        if let Some(lr) = lr {
            self.entries[lr].parent = Some(p);
        }
        let pp = self.entries[p].parent;
        self.entries[l].parent = pp;
        match pp {
            None => {
                root = l;
                self.entries[l].red = false;
            }
            Some(pp) => {
                if self.entries[pp].right == Some(p) {
                    self.entries[pp].right = Some(l);
                } else {
                    self.entries[pp].left = Some(l);
                }
            }
        }
        self.entries[l].right = Some(p);
        self.entries[p].parent = Some(l);
        root
    }

    /// Doubles the table. Each bucket splits into "lo" (same index) and "hi" (index + old capacity) keeping
    /// relative order; a split tree bin becomes a chain if small, is rebuilt if both halves are non-empty, and is
    /// kept as it is if every node stays on one side.
    fn resize(&mut self) {
        let old_cap = self.table.len();
        let old = std::mem::replace(&mut self.table, vec![Bin::default(); old_cap * 2]);
        for (j, bin) in old.into_iter().enumerate() {
            // (head, tail, count) of each half.
            let mut halves = [(None, None, 0usize); 2];
            let mut cur = bin.head;
            while let Some(n) = cur {
                cur = self.entries[n].next;
                let side = usize::from((self.entries[n].hash as u32 as usize) & old_cap != 0);
                let (head, tail, count) = &mut halves[side];
                self.entries[n].next = None;
                self.entries[n].prev = *tail;
                match *tail {
                    None => *head = Some(n),
                    Some(t) => self.entries[t].next = Some(n),
                }
                *tail = Some(n);
                *count += 1;
            }
            let both = halves[0].2 > 0 && halves[1].2 > 0;
            for (side, (head, _, count)) in halves.into_iter().enumerate() {
                let slot = j + side * old_cap;
                self.table[slot] = match (head, bin.root) {
                    (Some(h), Some(_)) if count > UNTREEIFY_THRESHOLD && both => self.build_tree(h),
                    (Some(h), Some(root)) if count > UNTREEIFY_THRESHOLD => Bin { head: Some(h), root: Some(root) },
                    (head, _) => Bin { head, root: None },
                };
            }
        }
        // Java: doubled from 16 buckets on, else (int) (capacity * 0.75); the same numbers for powers of two.
        self.threshold = self.table.len() * 3 / 4;
    }

    fn iteration_order(&self) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.size);
        for bin in &self.table {
            let mut cur = bin.head;
            while let Some(n) = cur {
                out.push(self.entries[n].index);
                cur = self.entries[n].next;
            }
        }
        out
    }
}

/// The order in which a Java 8+ `HashMap<String, String>` built by inserting `keys` in order iterates.
///
/// Returns indexes into `keys`. A repeated key keeps the slot of its first insertion (Java replaces the value in
/// place), so only its first index appears, once. OpenTSDB's tag-map texts and `/api/put` reply bodies follow
/// this order; callers use it to print tags the way a real TSD does.
pub fn hashmap_order(keys: &[&str]) -> Vec<usize> {
    let mut map = JavaHashMap::new();
    for (i, k) in keys.iter().enumerate() {
        map.put(i, k);
    }
    map.iteration_order()
}

/// [`hashmap_order`] for a map made with `new HashMap<>(keys.len())`, as OpenTSDB sizes some of its tag maps
/// (`Tags.resolveIdsAsync`, behind `/api/search/lookup`'s results): a smaller table, so another order.
pub fn sized_hashmap_order(keys: &[&str]) -> Vec<usize> {
    let mut map = JavaHashMap::with_capacity(keys.len());
    for (i, k) in keys.iter().enumerate() {
        map.put(i, k);
    }
    map.iteration_order()
}

/// `{k=v, k2=v2}` as Java's `AbstractMap.toString` prints a `HashMap<String, String>` filled in this order.
///
/// Used for OpenTSDB error texts that embed the tag map (`duplicate tag`, `Too many tags`, `bad timestamp`).
/// A repeated key shows once, at its first position, with the last value put (Java's replace-in-place).
pub fn format_map(pairs: &[(&str, &str)]) -> String {
    let keys: Vec<&str> = pairs.iter().map(|p| p.0).collect();
    // The last put of a key is the value Java would print.
    let last: std::collections::HashMap<&str, &str> = pairs.iter().copied().collect();
    let mut out = String::from("{");
    for (n, i) in hashmap_order(&keys).into_iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        let key = pairs[i].0;
        out.push_str(key);
        out.push('=');
        out.push_str(last.get(key).copied().unwrap_or(pairs[i].1));
    }
    out.push('}');
    out
}

/// Java's `Arrays.toString(byte[])`: `[63, -64, 0, 0]` (bytes are signed in Java), `[]` when empty.
///
/// OpenTSDB embeds the encoded value this way in the `bad timestamp=... when trying to add value=...` error.
pub fn byte_array(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + bytes.len() * 5);
    out.push('[');
    for (n, b) in bytes.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(&(*b as i8).to_string());
    }
    out.push(']');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order_of<'a>(keys: &[&'a str]) -> Vec<&'a str> {
        hashmap_order(keys).into_iter().map(|i| keys[i]).collect()
    }

    // spec: ingest §2.4 — the 9-tag example of PR #467 as Java 8 prints it.
    // "a".."g" hash to 97..103 -> buckets 1..7; "i" = 105 -> bucket 9; "host".hashCode() = 3208616 = 0x30F5A8,
    // spread 0x30F5A8 ^ 0x30 = 0x30F598 -> bucket 8. Nine entries stay under the threshold of 12.
    #[test]
    fn pr467_nine_tags() {
        let pairs = [
            ("a", "a"),
            ("b", "b"),
            ("c", "c"),
            ("d", "d"),
            ("e", "e"),
            ("f", "f"),
            ("g", "g"),
            ("host", "thursday"),
            ("i", "i"),
        ];
        assert_eq!(format_map(&pairs), "{a=a, b=b, c=c, d=d, e=e, f=f, g=g, host=thursday, i=i}");
        // Insertion order does not matter here: every key has its own bucket.
        let reversed: Vec<(&str, &str)> = pairs.iter().rev().copied().collect();
        assert_eq!(format_map(&reversed), "{a=a, b=b, c=c, d=d, e=e, f=f, g=g, host=thursday, i=i}");
    }

    // spec: ingest §2.4 — one tag.
    #[test]
    fn single_tag() {
        assert_eq!(format_map(&[("host", "web01")]), "{host=web01}");
        assert_eq!(format_map(&[]), "{}");
        assert_eq!(hashmap_order(&[]), Vec::<usize>::new());
    }

    // "dc".hashCode() = 100*31 + 99 = 3199 = 0xC7F, spread unchanged (< 2^16) -> bucket 15.
    // "host" -> bucket 8 (see above). So host always prints before dc.
    #[test]
    fn host_before_dc() {
        assert_eq!(order_of(&["dc", "host"]), ["host", "dc"]);
        assert_eq!(order_of(&["host", "dc"]), ["host", "dc"]);
        assert_eq!(format_map(&[("dc", "lga"), ("host", "web01")]), "{host=web01, dc=lga}");
    }

    // Same bucket keeps insertion order: "a" = 97 -> bucket 1, "q" = 113 = 0x71 -> bucket 1.
    #[test]
    fn same_bucket_insertion_order() {
        assert_eq!(order_of(&["q", "a"]), ["q", "a"]);
        assert_eq!(order_of(&["a", "q"]), ["a", "q"]);
    }

    // Repeated key: value replaced in place, first index only (Java put semantics).
    #[test]
    fn repeated_key_keeps_first_position() {
        assert_eq!(hashmap_order(&["q", "a", "q"]), vec![0, 1]);
        // new HashMap<>(2): "host" and "app" share bucket 0 of the small tables (hashes ..598 and ..a20), so
        // they keep their insertion order; in 16 buckets "app" (0) comes before "host" (8).
        assert_eq!(sized_hashmap_order(&["host", "app"]), vec![0, 1]);
        assert_eq!(hashmap_order(&["host", "app"]), vec![1, 0]);
        assert_eq!(sized_hashmap_order(&[]), Vec::<usize>::new());
        assert_eq!(format_map(&[("q", "1"), ("a", "2"), ("q", "3")]), "{q=3, a=2}");
    }

    // 13 keys exceed the threshold of 12 -> table of 32. "a".."l" = 0x61..0x6C land in buckets 1..12 in both
    // the 16- and the 32-bucket table, while "Q" = 0x51 is in bucket 1 at 16 but bucket 17 at 32. Insert Q then
    // a..l: before the resize Q leads bucket 1; after it a stays at 1 and Q moves to 17, so Q prints last.
    #[test]
    fn resize_reorders() {
        let mut keys = vec!["Q"];
        keys.extend(["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"]);
        // 13 keys: size 13 > 12 triggers the resize to 32 buckets.
        let got = order_of(&keys);
        assert_eq!(got[0], "a");
        assert_eq!(*got.last().unwrap_or(&""), "Q");
        // With 12 keys there is no resize and Q (inserted first) leads bucket 1.
        let got12 = order_of(&keys[..12]);
        assert_eq!(got12[..2], ["Q", "a"]);
    }

    // Code points above U+FFFF hash as two surrogate units: "😀" = D83D DE00,
    // hash = 0xD83D*31 + 0xDE00 = 55357*31 + 56832 = 1772899 = 0x1B0D63,
    // spread 0x1B0D63 ^ 0x1B = 0x1B0D78 -> bucket 8, i.e. it collides with "host" and comes after it if later.
    #[test]
    fn surrogate_pairs() {
        let units: Vec<u16> = "😀".encode_utf16().collect();
        assert_eq!(java_string_hash(&units), 1_772_899);
        assert_eq!(order_of(&["host", "😀"]), ["host", "😀"]);
        assert_eq!(order_of(&["😀", "host"]), ["😀", "host"]);
    }

    // Wrapping i32 arithmetic: "polygenelubricants".hashCode() == Integer.MIN_VALUE (a well-known Java fact).
    #[test]
    fn hash_wraps() {
        let units: Vec<u16> = "polygenelubricants".encode_utf16().collect();
        assert_eq!(java_string_hash(&units), i32::MIN);
        assert_eq!(spread(i32::MIN), i32::MIN | 0x8000);
    }

    // Nine keys with the same full hash ("Aa" and "BB" both hash to 2112, so any concatenation of n such
    // blocks collides 2^n ways) in a 16-bucket table: the 9th chain entry resizes to 32 instead of treeifying;
    // the chain keeps insertion order since all hashes are equal.
    #[test]
    fn long_chain_in_small_table_resizes() {
        let keys: Vec<String> =
            (0..9).map(|i: u32| (0..4).map(|b| if i >> b & 1 == 1 { "BB" } else { "Aa" }).collect()).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        assert_eq!(hashmap_order(&refs), (0..9).collect::<Vec<_>>());
    }

    // Oracle answers from a real JDK 17 HashMap (same algorithm as Java 8), recorded once: 16 colliding keys
    // inserted into a map that already has 60 keys (so the table has 128 buckets) form a tree bin whose
    // iteration order is tree-root first, then nodes linked after their tree parents.
    #[test]
    fn tree_bin_matches_jdk() {
        let mut keys: Vec<String> = (0..60).map(|i| format!("k{i}")).collect();
        keys.extend(
            (0..16u32).rev().map(|i| (0..4).map(|b| if i >> b & 1 == 1 { "BB" } else { "Aa" }).collect::<String>()),
        );
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let got: Vec<&str> = order_of(&refs).into_iter().filter(|k| k.len() == 8).collect();
        assert_eq!(got, TREE_BIN_JDK_ORDER);
    }

    const TREE_BIN_JDK_ORDER: [&str; 16] = [
        "BBAaBBBB", "BBBBBBBB", "AaBBBBBB", "AaAaBBBB", "BBBBAaBB", "BBBBAaAa", "BBBBBBAa", "AaBBAaBB", "AaBBAaAa",
        "AaBBBBAa", "BBAaAaBB", "BBAaAaAa", "BBAaBBAa", "AaAaAaBB", "AaAaAaAa", "AaAaBBAa",
    ];

    // JDK 17 oracle: in a 128-bucket table, 8 colliding keys are still a chain (insertion order), the 9th turns
    // the bin into a tree (root first, then the linked order of the tree build).
    #[test]
    fn treeify_on_ninth_chain_entry_matches_jdk() {
        let colliding = |n: u32| -> Vec<String> {
            let mut keys: Vec<String> = (0..60).map(|i| format!("k{i}")).collect();
            keys.extend(
                (0..n).rev().map(|i| (0..4).map(|b| if i >> b & 1 == 1 { "BB" } else { "Aa" }).collect::<String>()),
            );
            keys
        };
        let eight = colliding(8);
        let refs: Vec<&str> = eight.iter().map(String::as_str).collect();
        let got: Vec<&str> = order_of(&refs).into_iter().filter(|k| k.len() == 8).collect();
        assert_eq!(
            got,
            ["BBBBBBAa", "AaBBBBAa", "BBAaBBAa", "AaAaBBAa", "BBBBAaAa", "AaBBAaAa", "BBAaAaAa", "AaAaAaAa"]
        );
        let nine = colliding(9);
        let refs: Vec<&str> = nine.iter().map(String::as_str).collect();
        let got: Vec<&str> = order_of(&refs).into_iter().filter(|k| k.len() == 8).collect();
        assert_eq!(
            got,
            [
                "AaBBBBAa", "BBBBBBAa", "AaAaAaBB", "AaAaAaAa", "BBAaBBAa", "AaAaBBAa", "BBBBAaAa", "AaBBAaAa",
                "BBAaAaAa"
            ]
        );
    }

    // spec: ingest §2.6 notes — `[42]`, `[63, -64, 0, 0]` for 1.5f.
    #[test]
    fn byte_arrays() {
        assert_eq!(byte_array(&[]), "[]");
        assert_eq!(byte_array(&[42]), "[42]");
        assert_eq!(byte_array(&[0x3F, 0xC0, 0, 0]), "[63, -64, 0, 0]");
        assert_eq!(byte_array(&[0x80, 0xFF, 0x7F]), "[-128, -1, 127]");
    }
}

/// Java's `Double.toString(d)`: how OpenTSDB prints doubles (`42.5`, `100.0`, `1.0E7`, `9.349986906415408E11`,
/// `1.0E-4`, `NaN`). Plain notation for magnitudes in [1e-3, 1e7), computerized scientific otherwise, always with
/// a digit after the point. Digits are the shortest that round-trip, which is what JDK's algorithm gives for
/// virtually every value (spec: query §0, "Java-style number formatting").
pub fn double_to_string(d: f64) -> String {
    let mut out = String::with_capacity(24);
    write_double(&mut out, d);
    out
}

/// [`double_to_string`] appended to `out`, without allocating (a query answer prints one per point).
pub fn write_double(out: &mut String, d: f64) {
    if d.is_nan() {
        return out.push_str("NaN");
    }
    if d.is_infinite() {
        return out.push_str(if d > 0.0 { "Infinity" } else { "-Infinity" });
    }
    if d == 0.0 {
        return out.push_str(if d.is_sign_negative() { "-0.0" } else { "0.0" });
    }
    if d < 0.0 {
        out.push('-');
    }
    let abs = d.abs();
    // The shortest round-trip digits (zmij, serde_json's float printer: `perf` of a one-host day query had
    // `{:e}` and the formatting machinery around it at ~25% of the server's time).
    let mut buffer = zmij::Buffer::new();
    let printed = buffer.format_finite(abs);
    if (1e-3..1e7).contains(&abs) && printed.contains('.') && !printed.contains(['e', 'E']) {
        // In Java's plain range zmij prints what Java prints (`123.45`, `100.0`, `0.001`): nearly every value
        // of a query answer takes this path (perf of a one-host day query: the general path below was ~8% of
        // the server's time, the digits themselves ~4%).
        return out.push_str(printed);
    }
    write_digits(out, abs, printed);
}

/// [`write_double`]'s general path: Java's form rebuilt from the shortest digits `printed` of `abs` (positive,
/// finite), the sign already written.
fn write_digits(out: &mut String, abs: f64, printed: &str) {
    let mut digits = [0u8; 24];
    let (len, exp) = shortest_digits(printed, &mut digits);
    // ASCII digits only.
    let digits = std::str::from_utf8(&digits[..len]).unwrap_or("0");
    let (first, rest) = digits.split_at(1);
    if (1e-3..1e7).contains(&abs) {
        if exp >= 0 {
            let int_len = exp as usize + 1;
            out.push_str(first);
            if 1 + rest.len() > int_len {
                out.push_str(&rest[..int_len - 1]);
                out.push('.');
                out.push_str(&rest[int_len - 1..]);
            } else {
                out.push_str(rest);
                (1 + rest.len()..int_len).for_each(|_| out.push('0'));
                out.push_str(".0");
            }
        } else {
            out.push_str("0.");
            (0..-exp - 1).for_each(|_| out.push('0'));
            out.push_str(first);
            out.push_str(rest);
        }
    } else {
        out.push_str(first);
        out.push('.');
        out.push_str(if rest.is_empty() { "0" } else { rest });
        out.push('E');
        out.push_str(itoa::Buffer::new().format(exp));
    }
}

/// The significant digits of a positive finite number as a float printer wrote it (`123.45`, `100.0`,
/// `0.00012`, `1.5e-7`, `1e16`), without leading or trailing zeros, into `out`: their count, and the power of
/// ten of the first (`12345` and 2, `1` and 2, `12` and -4, `15` and -7, `1` and 16). At most 17 digits.
fn shortest_digits(printed: &str, out: &mut [u8; 24]) -> (usize, i32) {
    let printed = printed.as_bytes();
    let (mantissa, exp) = match printed.iter().position(|&b| b == b'e' || b == b'E') {
        Some(at) => {
            let exp = std::str::from_utf8(&printed[at + 1..]).ok().and_then(|e| e.parse::<i32>().ok());
            (&printed[..at], exp.unwrap_or(0))
        }
        None => (printed, 0),
    };
    let (int, frac) = match mantissa.iter().position(|&b| b == b'.') {
        Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
        None => (mantissa, &mantissa[mantissa.len()..]),
    };
    let int = &int[int.iter().take_while(|&&b| b == b'0').count()..];
    let (exp, leading) = if int.is_empty() {
        // 0.000ddd: the first digit is after the zeros.
        let zeros = frac.iter().take_while(|&&b| b == b'0').count();
        (exp - zeros as i32 - 1, zeros)
    } else {
        (exp + int.len() as i32 - 1, 0)
    };
    let mut len = 0;
    for &b in int.iter().chain(&frac[leading..]) {
        if len < out.len() {
            out[len] = b;
            len += 1;
        }
    }
    while len > 1 && out[len - 1] == b'0' {
        len -= 1;
    }
    (len, exp)
}

#[cfg(test)]
mod double_tests {
    use super::double_to_string;
    use proptest::prelude::*;

    /// The first, allocating version, kept as the model [`double_to_string`] must match.
    fn reference(d: f64) -> String {
        if d.is_nan() {
            return "NaN".to_string();
        }
        if d.is_infinite() {
            return if d > 0.0 { "Infinity" } else { "-Infinity" }.to_string();
        }
        if d == 0.0 {
            return if d.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
        }
        let sign = if d < 0.0 { "-" } else { "" };
        // `{:e}` gives the shortest round-trip digits as `d.ddde<exp>`.
        let sci = format!("{:e}", d.abs());
        let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
        let exp: i32 = exp.parse().unwrap_or(0);
        let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
        let abs = d.abs();
        if (1e-3..1e7).contains(&abs) {
            if exp >= 0 {
                let int_len = exp as usize + 1;
                let (int_part, frac) = if digits.len() > int_len {
                    (digits[..int_len].to_string(), digits[int_len..].to_string())
                } else {
                    (format!("{digits:0<int_len$}"), String::new())
                };
                let frac = if frac.is_empty() { "0".to_string() } else { frac };
                format!("{sign}{int_part}.{frac}")
            } else {
                let zeros = "0".repeat((-exp - 1) as usize);
                format!("{sign}0.{zeros}{digits}")
            }
        } else {
            let (first, rest) = digits.split_at(1);
            let rest = if rest.is_empty() { "0" } else { rest };
            format!("{sign}{first}.{rest}E{exp}")
        }
    }

    proptest! {
        // The plain range's shortcut prints what the general path builds from the digits.
        #[test]
        fn the_plain_shortcut_prints_what_the_digits_give(small in 1e-3f64..1e7, scale in -3i32..7, bits in any::<u64>()) {
            for d in [small, small.trunc().max(1.0), small / 10f64.powi(scale), f64::from_bits(bits).abs()] {
                if !(1e-3..1e7).contains(&d) {
                    continue;
                }
                let mut general = String::new();
                super::write_digits(&mut general, d, zmij::Buffer::new().format_finite(d));
                prop_assert_eq!(double_to_string(d), general);
            }
        }

        // The same as the first version, except where the value lies exactly halfway between two shortest
        // digit strings: Rust's `{:e}` then rounds the last digit up, Java (and zmij) to the even one.
        #[test]
        fn writes_what_the_reference_wrote(bits in any::<u64>(), small in -1e8f64..1e8, scale in -30i32..30) {
            for d in [f64::from_bits(bits), small, small * 10f64.powi(scale)] {
                let (ours, theirs) = (double_to_string(d), reference(d));
                if ours != theirs {
                    let back = |s: &str| s.parse::<f64>().unwrap();
                    prop_assert_eq!(back(&ours), d);
                    prop_assert_eq!(back(&theirs), d);
                    prop_assert_eq!(ours.len(), theirs.len());
                    let last = |s: &str| s.split('E').next().unwrap().bytes().last().unwrap();
                    prop_assert!(last(&ours) % 2 == 0 && last(&theirs) == last(&ours) + 1, "{ours} / {theirs}");
                }
            }
        }
    }

    // Values Java 17's Double.toString was asked for (the algorithm OpenTSDB 2.4's Java 8 runs too): on a tie
    // between two shortest strings it keeps the even last digit.
    #[test]
    // The literals are the exact doubles Java was given (a tie needs every digit), not approximations.
    #[allow(clippy::excessive_precision)]
    fn ties_round_to_the_even_digit_as_java_does() {
        for (d, java) in [
            (582442441726792.25, "5.824424417267922E14"),
            (1125899906842624.5, "1.1258999068426245E15"),
            (9007199254740993.0, "9.007199254740992E15"),
            (4.35e15 + 0.5, "4.3500000000000005E15"),
            (0.5e-300, "5.0E-301"),
            (1.25e15, "1.25E15"),
        ] {
            assert_eq!(double_to_string(d), java);
        }
    }

    #[test]
    fn shortest_digits_of_every_printed_form() {
        let cases = [
            ("123.45", ("12345", 2)),
            ("100.0", ("1", 2)),
            ("0.00012", ("12", -4)),
            ("1.5e-7", ("15", -7)),
            ("1e16", ("1", 16)),
            ("9.349986906415408e11", ("9349986906415408", 11)),
            ("5e-324", ("5", -324)),
            ("1.7976931348623157e308", ("17976931348623157", 308)),
        ];
        for (printed, (digits, exp)) in cases {
            let mut out = [0u8; 24];
            let (len, e) = super::shortest_digits(printed, &mut out);
            assert_eq!((std::str::from_utf8(&out[..len]).unwrap(), e), (digits, exp), "{printed}");
        }
    }

    #[test]
    fn formats_doubles_like_java() {
        // spec: query §0 fact 3 and its examples
        let cases: &[(f64, &str)] = &[
            (55.0, "55.0"),
            (42.5, "42.5"),
            (100.0, "100.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1e7, "1.0E7"),
            (9999999.0, "9999999.0"),
            (9.349986906415408E11, "9.349986906415408E11"),
            (4.15166544E8, "4.15166544E8"),
            (-1.25, "-1.25"),
            (1e-5, "1.0E-5"),
            (0.1, "0.1"),
            (12.3, "12.3"),
            (0.10000000149011612, "0.10000000149011612"),
            (123456.789, "123456.789"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (f64::NAN, "NaN"),
            (f64::INFINITY, "Infinity"),
            (f64::NEG_INFINITY, "-Infinity"),
            (1.7976931348623157E308, "1.7976931348623157E308"),
            // JDK <= 18 prints Double.MIN_VALUE as 4.9E-324, not the shortest 5.0E-324: subnormals are out of scope.
        ];
        for (d, want) in cases {
            assert_eq!(double_to_string(*d), *want, "{d:?}");
        }
    }
}
