//! The word encoding of [`super::Op`].

use super::{Buf, Elem, MAX_WORDS};

pub(super) struct Writer {
    words: [u32; MAX_WORDS],
    len: usize,
}

impl Writer {
    pub fn new() -> Self {
        Writer {
            words: [0; MAX_WORDS],
            len: 0,
        }
    }

    /// Appends a word. Every encoding fits `MAX_WORDS` (checked by the tests); an overflow would
    /// drop words and fail to decode rather than panic.
    pub fn put(&mut self, w: u32) -> &mut Self {
        if let Some(slot) = self.words.get_mut(self.len) {
            *slot = w;
        }
        self.len += 1;
        self
    }

    pub fn int(&mut self, v: i32) -> &mut Self {
        self.put(v as u32)
    }

    pub fn elem(&mut self, e: Elem) -> &mut Self {
        self.put(e as u32)
    }

    pub fn buf(&mut self, b: Buf) -> &mut Self {
        self.put(u32::from(b.region)).put(b.offset)
    }

    pub fn finish(&self) -> ([u32; MAX_WORDS], usize) {
        (self.words, self.len.min(MAX_WORDS))
    }
}

pub(super) struct Reader<'a> {
    words: &'a [u32],
    at: usize,
}

impl<'a> Reader<'a> {
    pub fn new(words: &'a [u32]) -> Self {
        Reader { words, at: 0 }
    }

    pub fn get(&mut self) -> Option<u32> {
        let w = *self.words.get(self.at)?;
        self.at += 1;
        Some(w)
    }

    pub fn int(&mut self) -> Option<i32> {
        self.get().map(|w| w as i32)
    }

    pub fn elem(&mut self) -> Option<Elem> {
        Elem::from_code(self.get()?)
    }

    pub fn buf(&mut self) -> Option<Buf> {
        let region = u8::try_from(self.get()?).ok()?;
        Some(Buf {
            region,
            offset: self.get()?,
        })
    }

    pub fn at_end(&self) -> bool {
        self.at == self.words.len()
    }
}
