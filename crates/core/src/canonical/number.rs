//! Numbers as RFC 8785 writes them (ECMAScript's `Number::toString`), and the exact
//! decimal value of a number's text, so two texts can be told to name one number.

use std::io;

/// The most significant digits a double's canonical form has.
const MAX_DIGITS: usize = 17;

/// A decimal `0.d₁…dₖ × 10^point`, without leading or trailing zeros; zero has no digits or sign.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct Decimal {
    negative: bool,
    digits: [u8; MAX_DIGITS],
    len: usize,
    point: i64,
}

const ZERO: Decimal = Decimal {
    negative: false,
    digits: [0; MAX_DIGITS],
    len: 0,
    point: 0,
};

const ZEROS: &[u8] = b"00000000000000000000";

/// Exponents past this are clamped: no double comes near, and the sums stay in range.
const EXPONENT_CLAMP: i64 = 1 << 40;

impl Decimal {
    /// The exact value of a JSON number's text (`-12.50e3`). `None` when it has more
    /// significant digits than any double's canonical form, or is not a number.
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let (negative, unsigned) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (mantissa, exponent) = match unsigned.bytes().position(|b| b == b'e' || b == b'E') {
            Some(at) => (
                unsigned.get(..at)?,
                parse_exponent(unsigned.get(at + 1..)?)?,
            ),
            None => (unsigned, 0),
        };
        let (whole, fraction) = match mantissa.bytes().position(|b| b == b'.') {
            Some(at) => (mantissa.get(..at)?, mantissa.get(at + 1..)?),
            None => (mantissa, ""),
        };
        if whole.is_empty() {
            return None;
        }
        let mut number = Self { negative, ..ZERO };
        // The value is 0.(whole fraction) × 10^(whole's length + exponent).
        let mut point = i64::try_from(whole.len()).ok()? + exponent;
        let mut zeros = 0;
        for digit in whole.bytes().chain(fraction.bytes()) {
            match digit {
                b'0' if number.len == 0 => point -= 1,
                b'0' => zeros += 1,
                b'1'..=b'9' => {
                    // Zeros inside the number count; trailing ones never reach here.
                    for digit in std::iter::repeat_n(b'0', zeros).chain([digit]) {
                        *number.digits.get_mut(number.len)? = digit;
                        number.len += 1;
                    }
                    zeros = 0;
                }
                _ => return None,
            }
        }
        if number.len == 0 {
            return Some(ZERO);
        }
        number.point = point;
        Some(number)
    }

    /// A finite double's canonical form: the shortest, nearest digits that read back; -0 is 0.
    pub(crate) fn of_f64(value: f64) -> Self {
        if value == 0.0 || !value.is_finite() {
            return ZERO;
        }
        let mut buffer = zmij::Buffer::new();
        // zmij writes the same shortest, nearest digits (at most 17) that serde_json does.
        Self::parse(buffer.format_finite(value)).unwrap_or(ZERO)
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.len == 0
    }

    /// Writes it as ECMAScript's `Number::toString` does: plain digits from 1e-6 up to 1e21,
    /// else one digit, a fraction and `e+n` / `e-n`. `out` never refuses a write.
    pub(crate) fn write<W: io::Write + ?Sized>(&self, out: &mut W) {
        let mut put = |bytes: &[u8]| {
            let _ = out.write_all(bytes);
        };
        let digits = self.digits.get(..self.len).unwrap_or_default();
        if digits.is_empty() {
            return put(b"0");
        }
        if self.negative {
            put(b"-");
        }
        // ECMAScript's k (how many digits) and n (where the point is).
        let k = digits.len() as i64;
        let n = self.point;
        // At most 20 zeros are written: up to 1e21, or after `0.` down to 1e-6.
        let zeros = |count: i64| ZEROS.get(..count as usize).unwrap_or_default();
        if k <= n && n <= 21 {
            put(digits);
            put(zeros(n - k));
        } else if 0 < n && n <= 21 {
            let (whole, fraction) = digits.split_at(n as usize);
            put(whole);
            put(b".");
            put(fraction);
        } else if -6 < n && n <= 0 {
            put(b"0.");
            put(zeros(-n));
            put(digits);
        } else {
            let (first, rest) = digits.split_at(1);
            put(first);
            if !rest.is_empty() {
                put(b".");
                put(rest);
            }
            let _ = write!(out, "e{:+}", n - 1);
        }
    }
}

/// An exponent's value (`+12`, `-3`, `007`), clamped far past any double's range.
fn parse_exponent(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first() {
        Some(b'-') => (true, text.get(1..)?),
        Some(b'+') => (false, text.get(1..)?),
        _ => (false, text),
    };
    if digits.is_empty() {
        return None;
    }
    let mut value: i64 = 0;
    for digit in digits.bytes() {
        if !digit.is_ascii_digit() {
            return None;
        }
        value = (value * 10 + i64::from(digit - b'0')).min(EXPONENT_CLAMP);
    }
    Some(if negative { -value } else { value })
}
