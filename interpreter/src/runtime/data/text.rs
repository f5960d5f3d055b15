//! Text corpora for language models: characters mapped to ids through a sorted vocabulary
//! (character level), or raw bytes (byte level).

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
    fn tiny_shakespeare_has_65_characters() {
        let c = read(&test_data("tinyshakespeare/input.txt"), false).unwrap();
        assert_eq!(c.vocab.len(), 65);
        assert_eq!(c.ids.shape, vec![1_115_394]);
        let first: String = c.ids.to_f64()[..14].iter().map(|i| c.vocab[*i as usize]).collect();
        assert_eq!(first, "First Citizen:");
    }
}
