//! The one-pass reading the hand readers share ([`super::aggregated`], [`super::details`]): a
//! [`Cursor`] over an answer that takes only the plain shape of JSON Flink writes and answers
//! `None` at anything else, so that its caller can leave the whole body to serde.
//!
//! What it takes, serde takes the same way: strings without escapes or control characters
//! (borrowed as they are), JSON numbers finite as doubles (read as the nearest double, as serde's
//! `float_roundtrip` reading gives), integers as serde reads them into `i64` and `u64`, and, for a
//! value nobody reads, any of these, `true`, `false`, `null`, and arrays and objects of them
//! nested at most [`SKIP_DEPTH`] deep. It is stricter than JSON everywhere else: a `None` costs only
//! the reading by serde.

/// How deep a value nobody reads may nest (serde's own limit is 128): deeper is left to serde.
const SKIP_DEPTH: u32 = 16;

/// The hand reading of `text` when it is of the plain shape (`plain` answers `Some`), else serde's
/// reading from the start, with serde's errors: the rule every hand reader follows.
pub(super) fn plain_or_serde<'a, T: serde::Deserialize<'a>>(
    text: &'a str,
    plain: impl FnOnce(&'a str) -> Option<T>,
) -> serde_json::Result<T> {
    match plain(text) {
        Some(read) => Ok(read),
        None => serde_json::from_str(text),
    }
}

/// A position in the body.
pub(super) struct Cursor<'a> {
    /// The body.
    text: &'a str,
    /// The next byte's index.
    pos: usize,
}

/// The fields of one object seen so far, by their order in its type: a field seen twice is
/// serde's "duplicate field" error, left to serde.
#[derive(Default)]
pub(super) struct Seen(u32);

impl Seen {
    /// Marks field `index` seen; `None` if it was already.
    pub(super) fn first(&mut self, index: u32) -> Option<()> {
        let bit = 1 << index;
        let first = self.0 & bit == 0;
        self.0 |= bit;
        first.then_some(())
    }

    /// Whether field `index` was seen (a required field not seen is serde's "missing field").
    pub(super) fn has(&self, index: u32) -> bool {
        self.0 & (1 << index) != 0
    }
}

/// Powers of ten exact as doubles (up to 10^22), for [`Cursor::number`]'s exact reading.
const EXACT_POWERS_OF_TEN: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// A JSON number's parts, as [`Cursor::scan_number`] found them.
struct Number {
    /// Where it starts in the body.
    start: usize,
    /// Whether it has a minus sign.
    negative: bool,
    /// Its digits (integer and fraction) as one integer, wrapped past 19 of them.
    digits: u64,
    /// How many digits `digits` holds, the integer part's leading `0` not counted.
    count: u32,
    /// Whether it has a fraction or an exponent (it is then not an integer to serde).
    decimal: bool,
    /// The power of ten that scales `digits` to the number, bounded (see [`Cursor::scan_number`]).
    scale: i64,
    /// How many digits the exponent has.
    exponent_digits: u32,
}

impl<'a> Cursor<'a> {
    /// At the start of `text`.
    pub(super) fn new(text: &'a str) -> Self {
        Self { text, pos: 0 }
    }

    /// The body's bytes.
    #[inline]
    fn bytes(&self) -> &'a [u8] {
        self.text.as_bytes()
    }

    /// The byte at the position, if any.
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.bytes().get(self.pos).copied()
    }

    /// Skips JSON's whitespace (the four characters serde skips).
    #[inline]
    fn skip_whitespace(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    /// Whether the next token is `byte`, taken if so.
    #[inline]
    pub(super) fn eat(&mut self, byte: u8) -> bool {
        self.skip_whitespace();
        let found = self.peek() == Some(byte);
        self.pos += usize::from(found);
        found
    }

    /// Takes the next token, which must be `byte`.
    #[inline]
    pub(super) fn expect(&mut self, byte: u8) -> Option<()> {
        self.eat(byte).then_some(())
    }

    /// Whether only whitespace is left (serde refuses trailing characters).
    pub(super) fn at_end(&mut self) -> bool {
        self.skip_whitespace();
        self.pos == self.text.len()
    }

    /// Whether the next token is `null`, taken if so.
    pub(super) fn null(&mut self) -> bool {
        self.literal("null")
    }

    /// Whether the next token is `word`, taken if so.
    fn literal(&mut self, word: &str) -> bool {
        self.skip_whitespace();
        let found = self
            .bytes()
            .get(self.pos..)
            .is_some_and(|rest| rest.starts_with(word.as_bytes()));
        self.pos += if found { word.len() } else { 0 };
        found
    }

    /// A string without escapes or control characters, as the text between its quotes.
    pub(super) fn plain_string(&mut self) -> Option<&'a str> {
        self.expect(b'"')?;
        let start = self.pos;
        let end = string_stop(self.bytes(), start)?;
        // Stopped at an escape or a control character (a tab too: inside a string it is refused,
        // not skipped as whitespace): not plain.
        if self.bytes()[end] != b'"' {
            return None;
        }
        self.pos = end + 1;
        // Between two ASCII quotes: on character boundaries.
        self.text.get(start..end)
    }

    /// An object whose keys are plain strings ([`Self::plain_string`]): `member` reads the value of
    /// each key, in the body's order.
    pub(super) fn object(&mut self, mut member: impl FnMut(&mut Self, &'a str) -> Option<()>) -> Option<()> {
        self.expect(b'{')?;
        if self.eat(b'}') {
            return Some(());
        }
        loop {
            let key = self.plain_string()?;
            self.expect(b':')?;
            member(self, key)?;
            if self.eat(b'}') {
                return Some(());
            }
            self.expect(b',')?;
        }
    }

    /// An array: `element` reads each element, in order.
    pub(super) fn array(&mut self, mut element: impl FnMut(&mut Self) -> Option<()>) -> Option<()> {
        self.expect(b'[')?;
        if self.eat(b']') {
            return Some(());
        }
        loop {
            element(self)?;
            if self.eat(b']') {
                return Some(());
            }
            self.expect(b',')?;
        }
    }

    /// A value nobody reads, checked and skipped (see the module docs for what is taken).
    pub(super) fn skip_value(&mut self) -> Option<()> {
        self.skip_nested(SKIP_DEPTH)
    }

    /// [`Self::skip_value`] with `depth` more levels of arrays and objects allowed.
    fn skip_nested(&mut self, depth: u32) -> Option<()> {
        self.skip_whitespace();
        match self.peek()? {
            b'"' => self.plain_string().map(drop),
            b'-' | b'0'..=b'9' => self.number().map(drop),
            b'{' => self.object(|at, _| at.skip_nested(depth.checked_sub(1)?)),
            b'[' => self.array(|at| at.skip_nested(depth.checked_sub(1)?)),
            _ => (self.literal("true") || self.literal("false") || self.null()).then_some(()),
        }
    }

    /// A JSON number (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`) that is finite as a
    /// double, as the nearest double.
    ///
    /// A number of at most 19 digits whose digits as an integer `m` are below 2^53, scaled by at
    /// most 10^22 either way, is `m * 10^e` or `m / 10^e`: both operands exact, so the one
    /// rounding of the operation gives the nearest double (Clinger's fast path). Any other is read
    /// by the standard library's parser, which is exact for all.
    pub(super) fn number(&mut self) -> Option<f64> {
        let n = self.scan_number()?;
        let exact = n.count <= 19 && n.exponent_digits <= 19 && n.digits < 1 << 53 && n.scale.abs() <= 22;
        let value = if exact {
            let power = EXACT_POWERS_OF_TEN[n.scale.unsigned_abs() as usize];
            let magnitude = if n.scale < 0 {
                n.digits as f64 / power
            } else {
                n.digits as f64 * power
            };
            if n.negative { -magnitude } else { magnitude }
        } else {
            self.text.get(n.start..self.pos)?.parse().ok()?
        };
        // serde refuses a number beyond the doubles ("number out of range"): its message, then.
        value.is_finite().then_some(value)
    }

    /// A JSON integer as serde reads it into an `i64`: no fraction or exponent (serde calls those
    /// floating point, and refuses them), and not `-0` (which serde reads as the double −0.0).
    /// Taken only up to 18 digits, which always fit.
    pub(super) fn integer(&mut self) -> Option<i64> {
        let n = self.scan_number()?;
        if n.decimal || n.count > 18 || (n.negative && n.digits == 0) {
            return None;
        }
        // At most 18 digits: below 10^18 < 2^63.
        let magnitude = n.digits as i64;
        Some(if n.negative { -magnitude } else { magnitude })
    }

    /// A JSON integer as serde reads it into a `u64`: as [`Self::integer`], without a sign, up
    /// to 19 digits (below 10^19 < 2^64).
    pub(super) fn unsigned(&mut self) -> Option<u64> {
        let n = self.scan_number()?;
        (!n.decimal && !n.negative && n.count <= 19).then_some(n.digits)
    }

    /// The parts of the JSON number at the position, which is taken; `None` where the grammar
    /// is not followed.
    fn scan_number(&mut self) -> Option<Number> {
        self.skip_whitespace();
        let start = self.pos;
        let negative = self.peek() == Some(b'-');
        self.pos += usize::from(negative);
        // The digits as one integer, while it has at most 19 of them (below 10^19 < 2^64).
        let mut digits = 0u64;
        let mut count = 0u32;
        match self.peek()? {
            b'0' => self.pos += 1,
            b'1'..=b'9' => count += self.digits(&mut digits),
            _ => return None,
        }
        let mut scale = 0i64;
        let mut decimal = false;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            decimal = true;
            let fraction = self.digits(&mut digits);
            if fraction == 0 {
                return None;
            }
            count += fraction;
            scale = -i64::from(fraction);
        }
        let mut exponent_digits = 0;
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            decimal = true;
            let sign = match self.peek() {
                Some(b'-') => -1,
                Some(b'+') => 1,
                _ => 0,
            };
            self.pos += usize::from(sign != 0);
            let mut exponent = 0u64;
            exponent_digits = self.digits(&mut exponent);
            if exponent_digits == 0 {
                return None;
            }
            // Bounded, so the sum cannot overflow; past 10^22 either way the exact reading is not taken.
            let exponent = exponent.min(1 << 20) as i64;
            scale += if sign < 0 { -exponent } else { exponent };
        }
        Some(Number {
            start,
            negative,
            digits,
            count,
            decimal,
            scale,
            exponent_digits,
        })
    }

    /// Skips the digits at the position, appending them to `value` (wrapping: its caller uses it
    /// only when there were at most 19), and returns how many there were.
    #[inline]
    fn digits(&mut self, value: &mut u64) -> u32 {
        let mut count = 0;
        while let Some(digit @ b'0'..=b'9') = self.peek() {
            *value = value.wrapping_mul(10).wrapping_add(u64::from(digit - b'0'));
            self.pos += 1;
            count += 1;
        }
        count
    }
}

/// The index of the first byte at or after `from` that is a quote, a backslash or a control
/// character (below 0x20): where a string without escapes must end. `None` if there is none.
///
/// Eight bytes at a time: in a word `w`, `(w - 0x01…01) & !w & 0x80…80` flags the bytes of `w`
/// that are zero, and `(w - 0x20…20) & !w & 0x80…80` those below 0x20. A borrow can flag a byte
/// falsely, but only above one flagged truly, so the lowest flag is always right. Strings here are
/// mostly keys and ids of 3 to 35 bytes, which a byte at a time took about 10 instructions a byte
/// to cross.
#[inline]
fn string_stop(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_ne_bytes([1; 8]);
    const HIGHS: u64 = ONES * 0x80;
    const QUOTES: u64 = ONES * b'"' as u64;
    const BACKSLASHES: u64 = ONES * b'\\' as u64;
    const SPACES: u64 = ONES * 0x20;
    let mut at = from;
    while let Some(word) = bytes.get(at..at + 8) {
        let mut eight = [0; 8];
        eight.copy_from_slice(word);
        let w = u64::from_le_bytes(eight);
        let quote = w ^ QUOTES;
        let backslash = w ^ BACKSLASHES;
        let flags = (quote.wrapping_sub(ONES) & !quote
            | backslash.wrapping_sub(ONES) & !backslash
            | w.wrapping_sub(SPACES) & !w)
            & HIGHS;
        if flags != 0 {
            // Little-endian: the lowest flag is the first byte.
            return Some(at + (flags.trailing_zeros() / 8) as usize);
        }
        at += 8;
    }
    let rest = bytes.get(at..)?;
    rest.iter()
        .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
        .map(|len| at + len)
}

/// Generators the hand readers' property tests share.
#[cfg(test)]
pub(super) mod testing {
    use proptest::prelude::*;

    /// A JSON number, mostly of the kinds Flink writes, with the grammar's corners.
    pub(in super::super) fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<f64>().prop_map(|v| format!("{v:?}")),
            any::<f64>().prop_map(|v| format!("{v:e}")),
            any::<i64>().prop_map(|v| v.to_string()),
            any::<u64>().prop_map(|v| v.to_string()),
            "-?(0|[1-9][0-9]{0,30})(\\.[0-9]{1,30})?([eE][+-]?[0-9]{1,3})?",
            // Within and around the exact reading's bounds (2^53, 19 digits, 10^22).
            "-?(0|[1-9][0-9]{0,17})(\\.[0-9]{1,6})?([eE][+-]?[0-9]{1,2})?",
            Just("-0".to_owned()),
            Just("-0.0".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just("-9223372036854775808".to_owned()),
            Just("-9223372036854775809".to_owned()),
            Just("2.2250738585072011e-308".to_owned()),
            Just("4.9e-325".to_owned()),
            Just("1.7976931348623158e308".to_owned()),
            Just("1.7976931348623159e308".to_owned()),
        ]
    }

    /// JSON whitespace, mostly none.
    pub(in super::super) fn space() -> impl Strategy<Value = &'static str> {
        prop_oneof![6 => Just(""), 1 => Just(" "), 1 => Just("\n\t"), 1 => Just("\r ")]
    }

    /// A string the plain shape takes (no escapes or control characters).
    pub(in super::super) fn text() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 :<>/._é-]{0,12}"
    }

    /// A value nobody reads, nested up to three levels.
    pub(in super::super) fn skipped() -> impl Strategy<Value = String> {
        let leaf = prop_oneof![
            text().prop_map(|t| format!("\"{t}\"")),
            finite(),
            Just("true".to_owned()),
            Just("false".to_owned()),
            Just("null".to_owned()),
        ];
        leaf.prop_recursive(3, 12, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(|v| format!("[{}]", v.join(","))),
                proptest::collection::vec(("[a-z-]{1,6}", inner), 0..4).prop_map(|members| {
                    let members: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
                    format!("{{{}}}", members.join(","))
                }),
            ]
        })
    }

    /// A number finite as a double (past them is serde's "number out of range"), others as 0.
    pub(in super::super) fn finite() -> impl Strategy<Value = String> {
        number().prop_map(|n| {
            if n.parse::<f64>().is_ok_and(f64::is_finite) {
                n
            } else {
                "0".to_owned()
            }
        })
    }

    /// An object of `members` (key and value) in the given order, with some whitespace.
    pub(in super::super) fn object(members: Vec<(&'static str, String)>, s: &str) -> String {
        let members: Vec<String> = members.iter().map(|(k, v)| format!("\"{k}\"{s}:{s}{v}")).collect();
        format!("{{{s}{}{s}}}", members.join(&format!("{s},{s}")))
    }

    /// `required` members, then any of `optional`, shuffled, with unknown members among them.
    pub(in super::super) fn members(
        required: Vec<(&'static str, BoxedStrategy<String>)>,
        optional: Vec<(&'static str, BoxedStrategy<String>)>,
    ) -> impl Strategy<Value = Vec<(&'static str, String)>> {
        let required: Vec<_> = required.into_iter().map(|(k, v)| v.prop_map(move |v| (k, v))).collect();
        let optional: Vec<_> = optional.into_iter().map(|(k, v)| v.prop_map(move |v| (k, v))).collect();
        let count = optional.len();
        (
            required,
            optional,
            proptest::sample::subsequence((0..count).collect::<Vec<_>>(), 0..=count),
            proptest::collection::vec(skipped().prop_map(|v| ("unknown-field", v)), 0..2),
        )
            .prop_flat_map(|(required, optional, picked, unknown)| {
                let mut all = required;
                all.extend(picked.into_iter().map(|i| optional[i].clone()));
                all.extend(unknown);
                Just(all).prop_shuffle()
            })
    }

    /// Both readings of `text` into an owned type: by `read` (by hand, falling back to serde) and
    /// by serde alone, errors as their messages.
    pub(in super::super) fn both_owned<T: serde::de::DeserializeOwned>(
        read: fn(&str) -> serde_json::Result<T>,
        text: &str,
    ) -> (Result<T, String>, Result<T, String>) {
        (
            read(text).map_err(|e| e.to_string()),
            serde_json::from_str(text).map_err(|e| e.to_string()),
        )
    }

    /// `text` with a part (up to 3 characters, or none) replaced by one of `mutations`: a body
    /// that may have left the plain shape, or JSON.
    pub(in super::super) fn spliced(
        text: impl Strategy<Value = String>,
        mutations: impl Strategy<Value = String>,
    ) -> impl Strategy<Value = String> {
        (text, any::<proptest::sample::Index>(), 0usize..4, mutations).prop_map(|(text, at, len, with)| {
            // On character boundaries: the body is text.
            let mut start = at.index(text.len() + 1);
            while !text.is_char_boundary(start) {
                start -= 1;
            }
            let mut end = (start + len).min(text.len());
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!("{}{with}{}", &text[..start], &text[end..])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// [`string_stop`] a byte at a time.
    fn stop_by_bytes(bytes: &[u8], from: usize) -> Option<usize> {
        (from..bytes.len()).find(|&i| matches!(bytes[i], b'"' | b'\\' | 0..0x20))
    }

    #[test]
    fn strings_stop_at_quotes_escapes_and_control_characters() {
        // Each stop within the first word, across it, and in the tail after it.
        assert_eq!(string_stop(b"abc\"defghijk", 0), Some(3));
        assert_eq!(string_stop(b"abcdefgh\\jk", 0), Some(8));
        assert_eq!(string_stop(b"abcdefghijkl\tm", 2), Some(12));
        assert_eq!(string_stop(b"\x1f", 0), Some(0));
        // 0x20 and above, UTF-8's bytes (0x80 and above) and 0x7f are string bytes.
        assert_eq!(string_stop("  é~\x7fabcdefgh".as_bytes(), 0), None);
        // A borrow from a stop falsely flags the byte above it; the first stop is still found.
        assert_eq!(string_stop(b"\x00\x01abcdefgh", 0), Some(0));
        assert_eq!(string_stop(b"ab\"!abcdefgh", 0), Some(2));
        assert_eq!(string_stop(b"", 0), None);
        assert_eq!(string_stop(b"ab", 3), None);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Eight bytes at a time finds what a byte at a time finds.
        #[test]
        fn string_stops_are_found_as_a_byte_at_a_time(
            bytes in proptest::collection::vec(
                prop_oneof![
                    8 => 0x20u8..0x7f,
                    1 => Just(b'"'),
                    1 => Just(b'\\'),
                    1 => 0u8..0x20,
                    1 => 0x7fu8..=0xff,
                    1 => prop_oneof![Just(b'!'), Just(b'#'), Just(b'['), Just(b']'), Just(b'!' + 0x80)],
                ],
                0..40,
            ),
            from in 0usize..48,
        ) {
            prop_assert_eq!(string_stop(&bytes, from), stop_by_bytes(&bytes, from));
        }
    }
}
