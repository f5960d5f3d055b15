//! Text corpora for language models: characters mapped to ids through a sorted vocabulary
//! (character level), raw bytes (byte level), or tokens of a Hugging Face `tokenizer.json`
//! (the `tokenizers` crate: BPE, WordPiece, Unigram, as the file says).

use super::{err, DataError};
use crate::runtime::tensor::Tensor;
use dlc_language::types::DType;
use std::path::Path;

pub struct Corpus {
    /// Token ids, i64 [len].
    pub ids: Tensor,
    /// The vocabulary: id -> character (empty at byte level, where id = byte).
    pub vocab: Vec<char>,
}

/// A tokenizer file read: `path` names it in errors.
pub fn tokenizer(path: &Path) -> Result<tokenizers::Tokenizer, DataError> {
    if !path.exists() {
        return Err(err(path, "no such tokenizer file"));
    }
    tokenizers::Tokenizer::from_file(path).map_err(|e| err(path, format!("not a tokenizer.json the tokenizers library reads: {e}")))
}

/// The ids `tok` gives `text` (no special tokens added: a corpus is one stream of text).
pub fn encode(tok: &tokenizers::Tokenizer, text: &str, path: &Path) -> Result<Vec<u32>, DataError> {
    let enc = tok.encode_fast(text, false).map_err(|e| err(path, format!("cannot tokenize: {e}")))?;
    Ok(enc.get_ids().to_vec())
}

/// The corpus at `path` tokenised by the tokenizer file `tok`.
pub fn read_tokenized(path: &Path, tok: &Path) -> Result<Corpus, DataError> {
    let tokenizer = tokenizer(tok)?;
    let bytes = std::fs::read(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| err(path, "not UTF-8 text (a tokenizer reads text)"))?;
    if text.is_empty() {
        return Err(err(path, "empty text file"));
    }
    let ids = encode(&tokenizer, &text, path)?;
    let n = ids.len();
    Ok(Corpus { ids: Tensor::from_f64(DType::I64, vec![n], ids.into_iter().map(f64::from)), vocab: vec![] })
}

pub fn read(path: &Path, byte_level: bool) -> Result<Corpus, DataError> {
    let bytes = std::fs::read(path).map_err(|e| err(path, format!("cannot read: {e}")))?;
    if bytes.is_empty() {
        return Err(err(path, "empty text file"));
    }
    if byte_level {
        let n = bytes.len();
        return Ok(Corpus { ids: Tensor::from_f64(DType::I64, vec![n], bytes.iter().map(|b| *b as f64)), vocab: vec![] });
    }
    let text = String::from_utf8(bytes).map_err(|_| err(path, "not UTF-8 text (use level: \"byte\" for binary data)"))?;
    let mut vocab: Vec<char> = text.chars().collect();
    vocab.sort();
    vocab.dedup();
    let ids: Vec<f64> = text.chars().map(|c| vocab.binary_search(&c).unwrap_or(0) as f64).collect();
    let n = ids.len();
    Ok(Corpus { ids: Tensor::from_f64(DType::I64, vec![n], ids), vocab })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::data::test_data;

    #[test]
    fn the_bundled_tokenizer_gives_bpe_ids_that_decode_to_the_text() {
        let tok = test_data("tinyshakespeare/tokenizer.json");
        let c = read_tokenized(&test_data("tinyshakespeare/input.txt"), &tok).unwrap();
        // 512 tokens, about two bytes an id (scripts/train_tokenizer.py prints 575,345).
        assert_eq!(c.ids.shape, vec![575_345]);
        let ids: Vec<u32> = c.ids.to_f64()[..8].iter().map(|i| *i as u32).collect();
        assert!(ids.iter().all(|i| *i < 512));
        let t = tokenizer(&tok).unwrap();
        assert!(t.decode(&ids, false).unwrap().starts_with("First"), "{:?}", t.decode(&ids, false));
        let e = read_tokenized(&test_data("tinyshakespeare/input.txt"), &test_data("tinyshakespeare/input.txt")).err().unwrap();
        assert!(e.to_string().contains("not a tokenizer.json"), "{e}");
    }

    #[test]
    fn tiny_shakespeare_has_65_characters() {
        let c = read(&test_data("tinyshakespeare/input.txt"), false).unwrap();
        assert_eq!(c.vocab.len(), 65);
        assert_eq!(c.ids.shape, vec![1_115_394]);
        let first: String = c.ids.to_f64()[..14].iter().map(|i| c.vocab[*i as usize]).collect();
        assert_eq!(first, "First Citizen:");
    }
}
