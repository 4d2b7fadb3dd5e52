//! ldapsearch's unwrapped LDIF (`-LLL -o ldif-wrap=no`) split into entries: `users sync`
//! reads 100,000s of entries a home, and splitting them line by line in Python took
//! about 1 s per 100,000 users, under the GIL, most of a full read; a home's users and
//! groups are made from it here as the merge takes them (geofed.ops.users).
//! And the other way, entries made into LDIF for slapadd (the first sync's 200,000),
//! where no value needs base64; and the merge itself (geofed.ops.users.merge): 200,000
//! merged entries with their digests a first sync at 100,000 users per site.

use std::borrow::Cow;

#[cfg(feature = "python")]
mod python;

/// One entry: its DN and its (attribute, value) pairs in the order they came.
#[derive(Debug, PartialEq)]
pub struct Entry<'a> {
    pub dn: Cow<'a, str>,
    pub values: Vec<(&'a str, Cow<'a, str>)>,
}

/// The entries of unwrapped LDIF: blank lines end an entry, comment lines (`#`) are
/// skipped, each other line is `name: value` (split at its first colon, one space after
/// it dropped) or `name:: base64`, the first an entry's DN. An error names a base64
/// value that is no UTF-8 text.
pub fn entries(text: &str) -> Result<Vec<Entry<'_>>, String> {
    let mut out = Vec::new();
    let mut current: Option<Entry> = None;
    for row in text.split('\n') {
        if row.is_empty() {
            if let Some(e) = current.take() {
                out.push(e);
            }
            continue;
        }
        if row.starts_with('#') {
            continue;
        }
        let (name, value) = match row.find(':') {
            Some(i) => match row[i + 1..].strip_prefix(':') {
                Some(encoded) => {
                    (&row[..i], Cow::Owned(decode(encoded).ok_or_else(|| format!("{}: bad base64", &row[..i]))?))
                }
                None => (&row[..i], Cow::Borrowed(row[i + 1..].strip_prefix(' ').unwrap_or(&row[i + 1..]))),
            },
            None => (row, Cow::Borrowed("")),
        };
        match current.as_mut() {
            None => current = Some(Entry { dn: value, values: Vec::new() }),
            Some(e) => e.values.push((name, value)),
        }
    }
    if let Some(e) = current {
        out.push(e);
    }
    Ok(out)
}

/// A base64 value as text (spaces skipped, padding ends it); None where it is not
/// base64 or not UTF-8.
fn decode(encoded: &str) -> Option<String> {
    let mut out = Vec::with_capacity(encoded.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for b in encoded.bytes() {
        let six = match b {
            b'A'..=b'Z' => b - b'A',
            b'a'..=b'z' => b - b'a' + 26,
            b'0'..=b'9' => b - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            b' ' => continue,
            b'=' => break,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(six);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    String::from_utf8(out).ok()
}

/// An LDAP integer's value (a uidNumber); None where it is none.
pub fn integer(value: &str) -> Option<i64> {
    value.trim().parse().ok()
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

/// Whether `name` is a POSIX login or group name as users sync takes it: a-z or _, then
/// at most 31 of a-z 0-9 _ . - (geofed.ops.users' rule, a regular expression ending in
/// `$`, which also lets one line break end the name: kept as it was).
pub fn posix_name(name: &str) -> bool {
    let name = name.strip_suffix('\n').unwrap_or(name).as_bytes();
    matches!(name.first(), Some(b'a'..=b'z' | b'_'))
        && name.len() <= 32
        && name[1..].iter().all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_' | b'.' | b'-'))
}

/// A merged entry's digest (geofedDigest): SHA-256 of its `name<TAB>value` lines sorted by
/// name, joined by line breaks; the text is fixed, entries written by earlier syncs keep
/// matching.
pub fn digest(values: &mut [(&str, Cow<'_, str>)]) -> String {
    values.sort_by(|a, b| a.0.cmp(b.0));
    let mut text = String::with_capacity(256);
    for (i, (name, value)) in values.iter().enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(name);
        text.push('\t');
        text.push_str(value);
    }
    sha256_hex(text.as_bytes())
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

    fn pairs<'a>(e: &'a Entry) -> Vec<(&'a str, &'a str)> {
        e.values.iter().map(|(n, v)| (*n, v.as_ref())).collect()
    }

    #[test]
    fn splits_entries_and_values() {
        let text = "dn: uid=a,ou=people,o=x\nuid: a\ncn: A\ncn: Ay\nloginShell:\n\n\ndn: cn=g,o=x\nmemberUid: a\n";
        let got = entries(text).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].dn, "uid=a,ou=people,o=x");
        assert_eq!(pairs(&got[0]), vec![("uid", "a"), ("cn", "A"), ("cn", "Ay"), ("loginShell", "")]);
        assert_eq!(got[1].dn, "cn=g,o=x");
        assert_eq!(pairs(&got[1]), vec![("memberUid", "a")]);
    }

    #[test]
    fn a_value_keeps_its_colons_and_inner_spaces() {
        let got = entries("dn: o=x\ndescription: a: b  c\n").unwrap();
        assert_eq!(pairs(&got[0]), vec![("description", "a: b  c")]);
    }

    #[test]
    fn base64_values_are_decoded_and_comments_skipped() {
        // base64 of "cn=J\u{fc}rgen,o=x" and of " J\u{fc}rgen " (a leading and a trailing space)
        let text = "# a search reference\ndn:: Y249SsO8cmdlbixvPXg=\ngecos:: IErDvHJnZW4g\ncn:: \n# paging\n";
        let got = entries(text).unwrap();
        assert_eq!(got[0].dn, "cn=J\u{fc}rgen,o=x");
        assert_eq!(pairs(&got[0]), vec![("gecos", " J\u{fc}rgen "), ("cn", "")]);
        assert!(entries("dn: o=x\ncn:: *not*\n").unwrap_err().contains("cn"));
        assert!(entries("dn: o=x\ncn:: /w==\n").is_err()); // 0xff: no UTF-8
    }

    #[test]
    fn integers_as_ldap_writes_them() {
        assert_eq!(integer("10231"), Some(10231));
        assert_eq!(integer(" -5 "), Some(-5));
        assert_eq!(integer("x"), None);
        assert_eq!(integer(""), None);
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
    fn posix_names_as_the_merge_takes_them() {
        for n in ["a", "_x", "ab.c-d_9", &"a".repeat(32), "abc\n"] {
            assert!(posix_name(n), "{n:?}");
        }
        for n in ["", "9a", "Ab", "a b", "j\u{fc}rgen", &"a".repeat(33), "a\n\n", "-a", ".a"] {
            assert!(!posix_name(n), "{n:?}");
        }
    }

    #[test]
    fn digest_of_lines_sorted_by_name() {
        let mut values = [("uidNumber", Cow::Borrowed("7")), ("memberUid", "a,b".into()), ("cn", "A".into())];
        assert_eq!(digest(&mut values), sha256_hex(b"cn\tA\nmemberUid\ta,b\nuidNumber\t7"));
    }

    #[test]
    fn nothing_for_blank_text() {
        assert!(entries("\n\n").unwrap().is_empty());
        assert!(entries("").unwrap().is_empty());
    }
}
