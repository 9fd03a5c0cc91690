//! Chunked transfer coding: a byte state machine that finds the payload.

/// Where we are inside a chunked body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chunked {
    Size(u64),
    Extension(u64),
    SizeLf(u64),
    Data(u64),
    DataCr,
    DataLf,
    TrailerStart,
    TrailerLine,
    FinalLf,
    Done,
}

/// What one call consumed.
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    /// Bytes of `input` used (the rest belongs to whatever follows).
    pub consumed: usize,
    pub done: bool,
}

impl Chunked {
    pub fn new() -> Chunked {
        Chunked::Size(0)
    }

    /// Advance over `input`, calling `payload` with each slice of chunk data.
    pub fn advance(&mut self, input: &[u8], payload: &mut impl FnMut(&[u8])) -> Result<Step, &'static str> {
        let mut i = 0;
        while i < input.len() {
            if let Chunked::Data(left) = *self {
                let take = (left as usize).min(input.len() - i);
                payload(&input[i..i + take]);
                i += take;
                let left = left - take as u64;
                *self = if left == 0 { Chunked::DataCr } else { Chunked::Data(left) };
                continue;
            }
            let b = input[i];
            i += 1;
            *self = match (*self, b) {
                (Chunked::Size(n), b) if b.is_ascii_hexdigit() => {
                    let digit = (b as char).to_digit(16).unwrap_or(0) as u64;
                    Chunked::Size(n.checked_mul(16).and_then(|v| v.checked_add(digit)).ok_or("chunk size overflow")?)
                }
                (Chunked::Size(n), b';' | b' ' | b'\t') | (Chunked::Extension(n), _) if b != b'\r' && b != b'\n' => {
                    Chunked::Extension(n)
                }
                (Chunked::Size(n) | Chunked::Extension(n), b'\r') => Chunked::SizeLf(n),
                (Chunked::Size(n) | Chunked::Extension(n) | Chunked::SizeLf(n), b'\n') => {
                    if n == 0 {
                        Chunked::TrailerStart
                    } else {
                        Chunked::Data(n)
                    }
                }
                (Chunked::DataCr, b'\r') => Chunked::DataLf,
                (Chunked::DataCr | Chunked::DataLf, b'\n') => Chunked::Size(0),
                (Chunked::TrailerStart, b'\r') => Chunked::FinalLf,
                (Chunked::TrailerStart | Chunked::FinalLf, b'\n') => Chunked::Done,
                (Chunked::TrailerStart | Chunked::TrailerLine, b) => {
                    if b == b'\n' {
                        Chunked::TrailerStart
                    } else {
                        Chunked::TrailerLine
                    }
                }
                _ => return Err("bad chunked framing"),
            };
            if *self == Chunked::Done {
                return Ok(Step { consumed: i, done: true });
            }
        }
        Ok(Step { consumed: i, done: *self == Chunked::Done })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(pieces: &[&[u8]]) -> Result<(Vec<u8>, usize, bool), &'static str> {
        let mut state = Chunked::new();
        let mut body = Vec::new();
        let mut used = 0;
        for piece in pieces {
            let step = state.advance(piece, &mut |d| body.extend_from_slice(d))?;
            used += step.consumed;
            if step.done {
                return Ok((body, used, true));
            }
        }
        Ok((body, used, false))
    }

    #[test]
    fn whole_and_split() {
        let wire = b"5\r\nhello\r\n1;ext=1\r\n \r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
        let (body, used, done) = run(&[wire]).unwrap();
        assert_eq!((body.as_slice(), done), (&b"hello 0123456789"[..], true));
        assert_eq!(used, wire.len() - 4);
        // Byte by byte gives the same.
        let bytes: Vec<&[u8]> = wire[..wire.len() - 4].chunks(1).collect();
        let (body2, _, done2) = run(&bytes).unwrap();
        assert_eq!((body2, done2), (body, true));
    }

    #[test]
    fn bare_lf_and_errors() {
        assert!(run(&[b"3\nabc\n0\n\n"]).unwrap().2);
        assert!(run(&[b"zz\r\n"]).is_err());
        assert!(run(&[b"3\r\nabcX"]).is_err());
        assert!(run(&[b"ffffffffffffffffff\r\n"]).is_err());
        assert!(!run(&[b"3\r\nab"]).unwrap().2);
    }
}
