//! Java renderings that leak into OpenTSDB's user-facing texts. STUB: being written.

/// The order in which a Java 8+ `HashMap<String, String>` built by inserting `keys` in order iterates.
pub fn hashmap_order(keys: &[&str]) -> Vec<usize> {
    (0..keys.len()).collect()
}

/// `{k=v, k2=v2}` as Java's `AbstractMap.toString` prints a `HashMap<String, String>` filled in this order.
pub fn format_map(pairs: &[(&str, &str)]) -> String {
    let keys: Vec<&str> = pairs.iter().map(|p| p.0).collect();
    let mut out = String::from("{");
    for (n, i) in hashmap_order(&keys).into_iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(pairs[i].0);
        out.push('=');
        out.push_str(pairs[i].1);
    }
    out.push('}');
    out
}

/// Java's `Arrays.toString(byte[])`: `[63, -64, 0, 0]`.
pub fn byte_array(bytes: &[u8]) -> String {
    let parts: Vec<String> = bytes.iter().map(|b| (*b as i8).to_string()).collect();
    format!("[{}]", parts.join(", "))
}
