//! FNV-1a, 64 bits: a hash that is stable across builds and platforms, for what is stored or
//! compared between runs (triple ids, graph digests, the text hash of a stored passage vector).

/// Lower-case hex of `bytes` (how a SHA-256 is written where it is stored or configured).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// FNV-1a over `parts`, each followed by the byte 0xff so ("ab", "c") and ("a", "bc") differ.
pub fn fnv1a(parts: &[&str]) -> u64 {
    fnv1a_bytes(parts.iter().flat_map(|p| p.bytes().chain(std::iter::once(0xff))))
}

/// FNV-1a over a stream of bytes as they are (a file's, say).
pub fn fnv1a_bytes(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    #[test]
    fn parts_are_kept_apart_and_the_value_is_fixed() {
        assert_ne!(super::fnv1a(&["ab", "c"]), super::fnv1a(&["a", "bc"]));
        // a stored value: changing the function would orphan every stored hash
        assert_eq!(super::fnv1a(&[]), 0xcbf2_9ce4_8422_2325);
        assert_eq!(super::fnv1a(&["a"]), {
            let h = (0xcbf2_9ce4_8422_2325u64 ^ b'a' as u64).wrapping_mul(0x0100_0000_01b3);
            (h ^ 0xff).wrapping_mul(0x0100_0000_01b3)
        });
    }
}
