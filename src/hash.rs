//! Hashing: rustc-hash's Fx hasher for integer and short-string keys (std's SipHash guards against
//! adversarial keys we never have and costs ~3x on vocab and n-gram lookups), and a full-avalanche
//! mix for seeds.
pub type FastBuild = rustc_hash::FxBuildHasher;
pub type FastMap<K, V> = std::collections::HashMap<K, V, FastBuild>;
pub type FastSet<K> = std::collections::HashSet<K, FastBuild>;

/// splitmix64's finalizer: a full-avalanche 64-bit mix, used where hash values must look uniform
/// (MinHash) or seeds must be independent (shuffles, masks, dropout), not just spread over buckets.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}
