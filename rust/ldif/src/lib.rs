//! ldapsearch's unwrapped LDIF (`-LLL -o ldif-wrap=no`) split into entries: `users sync`
//! reads 100,000s of entries a home, and splitting them line by line in Python took
//! about 1 s per 100,000 users, under the GIL, most of a full read.
//!
//! Only plain LDIF: no base64 value (`::`) and no comment; the caller keeps its general
//! loop for the rest (geofed.ops.ldapcli.parse). And the other way, entries made into
//! LDIF for slapadd (the first sync's 200,000), where no value needs base64; and each
//! merged entry's digest (geofed.ops.users.Merge.wanted), made 200,000 times a first sync.

#[cfg(feature = "python")]
mod python;

/// One entry: its DN and its (attribute, value) pairs in the order they came.
#[derive(Debug, PartialEq)]
pub struct Entry<'a> {
    pub dn: &'a str,
    pub values: Vec<(&'a str, &'a str)>,
}

/// The entries of plain LDIF: blank lines end an entry, each line is `name: value`
/// (split at its first colon, one space after it dropped), the first an entry's DN.
pub fn entries(text: &str) -> Vec<Entry<'_>> {
    let mut out = Vec::new();
    let mut current: Option<Entry> = None;
    for row in text.split('\n') {
        if row.is_empty() {
            if let Some(e) = current.take() {
                out.push(e);
            }
            continue;
        }
        let (name, value) = match row.find(':') {
            Some(i) => (&row[..i], row[i + 1..].strip_prefix(' ').unwrap_or(&row[i + 1..])),
            None => (row, ""),
        };
        match current.as_mut() {
            None => current = Some(Entry { dn: value, values: Vec::new() }),
            Some(e) => e.values.push((name, value)),
        }
    }
    if let Some(e) = current {
        out.push(e);
    }
    out
}

/// Whether LDIF carries `value` as it is after `name: ` (printable ASCII, not starting
/// with a space, ':' or '<', not ending with a space); else it must be base64.
pub fn plain(value: &str) -> bool {
    value.bytes().all(|b| (0x20..0x7f).contains(&b))
        && !matches!(value.as_bytes().first(), Some(b' ' | b':' | b'<'))
        && !value.ends_with(' ')
}

/// Append `name: value` and a line break to `out`; false (nothing appended) where the
/// value is not `plain`.
pub fn push_line(out: &mut String, name: &str, value: &str) -> bool {
    if !plain(value) {
        return false;
    }
    out.push_str(name);
    out.push_str(": ");
    out.push_str(value);
    out.push('\n');
    true
}

/// SHA-256 of `data` in lower-case hex (a merged entry's digest, geofed.ops.users).
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in Sha256::digest(data) {
        out.push(HEX[(b >> 4) as usize] as char);
        out.push(HEX[(b & 15) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_values_are_printable_ascii_without_a_leading_or_trailing_mark() {
        for v in ["a", "A: B", "a: :b", "", "/bin/bash", "uid=a,ou=people,o=x"] {
            assert!(plain(v), "{v:?}");
        }
        for v in ["J\u{fc}rgen", " lead", ":colon", "<angle", "trail ", "two\nlines", "tab\there"] {
            assert!(!plain(v), "{v:?}");
        }
        let mut out = String::new();
        assert!(push_line(&mut out, "cn", "A"));
        assert!(!push_line(&mut out, "cn", " B"));
        assert_eq!(out, "cn: A\n");
    }

    #[test]
    fn splits_entries_and_values() {
        let text = "dn: uid=a,ou=people,o=x\nuid: a\ncn: A\ncn: Ay\nloginShell:\n\n\ndn: cn=g,o=x\nmemberUid: a\n";
        let got = entries(text);
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].dn, "uid=a,ou=people,o=x");
        assert_eq!(got[0].values, vec![("uid", "a"), ("cn", "A"), ("cn", "Ay"), ("loginShell", "")]);
        assert_eq!(got[1], Entry { dn: "cn=g,o=x", values: vec![("memberUid", "a")] });
    }

    #[test]
    fn a_value_keeps_its_colons_and_inner_spaces() {
        let got = entries("dn: o=x\ndescription: a: b  c\n");
        assert_eq!(got[0].values, vec![("description", "a: b  c")]);
    }

    #[test]
    fn sha256_in_lower_case_hex() {
        // hashlib.sha256(b"cn\tA\nmemberUid\ta,b\nuidNumber\t7").hexdigest()
        assert_eq!(
            sha256_hex(b"cn\tA\nmemberUid\ta,b\nuidNumber\t7"),
            "cce157741111998bd080bb06d8c824b8470cdf97d8ef0c9824e5ba6b82db9957"
        );
        assert_eq!(sha256_hex(b""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    }

    #[test]
    fn nothing_for_blank_text() {
        assert!(entries("\n\n").is_empty());
        assert!(entries("").is_empty());
    }
}
