//! The special tokens every BERT input is framed with, looked up in the model's vocabulary.
use crate::error::{Error, Result};
use crate::tokenize::Tokenizer;

/// `[CLS]`, `[SEP]` and `[PAD]` ids.
#[derive(Clone, Copy, Debug)]
pub struct Specials {
    pub cls: u32,
    pub sep: u32,
    pub pad: u32,
}

impl Specials {
    pub fn of(tok: &Tokenizer) -> Result<Specials> {
        let id = |t: &str| {
            tok.token_id(t).ok_or_else(|| {
                Error::file(tok.source(), format!("the vocabulary has no {t} token"))
            })
        };
        Ok(Specials {
            cls: id("[CLS]")?,
            sep: id("[SEP]")?,
            pad: id("[PAD]")?,
        })
    }
}
