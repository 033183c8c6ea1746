//! recipe/state.rs's tests: content fingerprints and the run state they keep.
use super::*;

/// Content fingerprints: the same bytes written later are the same input, other bytes of the
/// same size are not; a state written before (size and mtime) still holds for an unchanged
/// file.
#[test]
fn fingerprints_by_content_and_earlier_states_still_hold() {
    let d = tempfile::tempdir().unwrap();
    let at = |name: &str, bytes: &[u8]| {
        let p = d.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let a = at("a", b"abc");
    let (legacy, now) = (
        fingerprint(&a, &[], Kind::Legacy).unwrap(),
        fingerprint(&a, &[], Kind::Content).unwrap(),
    );
    assert!(now.starts_with(FILE_TAG) && !legacy.starts_with(FILE_TAG));
    assert!(still_holds(&a, &legacy, &now, &[]).unwrap());
    assert!(still_holds(&a, &now, &now, &[]).unwrap());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let copy = at("copy", b"abc");
    assert_eq!(fingerprint(&copy, &[], Kind::Content).unwrap(), now);
    assert_ne!(fingerprint(&copy, &[], Kind::Legacy).unwrap(), legacy);
    let other = at("other", b"abd");
    assert_ne!(fingerprint(&other, &[], Kind::Content).unwrap(), now);
    let dir = fingerprint(d.path(), &[], Kind::Content).unwrap();
    assert!(dir.starts_with(DIR_TAG) && dir.contains(":3:"), "{dir}");
}

/// A same-size rewrite that keeps the file's modification time (a copy with preserved times,
/// or one within the clock's granularity) is a change: the memo of hashes does not hide it.
#[test]
fn a_same_size_rewrite_with_the_same_mtime_is_a_change() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("train.csv");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    let write = |bytes: &[u8]| {
        std::fs::write(&p, bytes).unwrap();
        let f = std::fs::File::options().write(true).open(&p).unwrap();
        f.set_modified(old).unwrap();
    };
    write(b"a,1\n");
    let first = fingerprint(&p, &[], Kind::Content).unwrap();
    write(b"b,2\n");
    let second = fingerprint(&p, &[], Kind::Content).unwrap();
    assert_ne!(first, second, "same size, same mtime, other bytes");
    // a file written just now is hashed again each time, never memoised
    std::fs::write(&p, b"c,3\n").unwrap();
    let third = fingerprint(&p, &[], Kind::Content).unwrap();
    std::fs::write(&p, b"d,4\n").unwrap();
    assert_ne!(third, fingerprint(&p, &[], Kind::Content).unwrap());
}
