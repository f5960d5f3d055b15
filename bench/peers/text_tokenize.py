"""Tiny Shakespeare (examples/data/tinyshakespeare/input.txt, 1.1 MB) tokenised by the bundled
byte-level BPE (tokenizer.json, 512 tokens) and cut into the `(x, y)` blocks of 64 tokens that
examples/shakespeare_bpe.dl's `text(..., block: 64, tokenizer: ...)` makes: non-overlapping
windows, `x = ids[64 i : 64 i + 64]`, `y` the same shifted by one, as two i64 tensors.

Timed: from nothing read (the tokenizer file and the text both loaded inside the timer) to the two
tensors, after the imports (dlc's `prepare_s` likewise starts in a running process). One variant
a process (`--variants`), so nothing is warm from an earlier one. The variants:
- `datasets-map-np1`, `datasets-map-np2`: what a Hugging Face user writes. `load_dataset("text",
  ..., keep_linebreaks=True)` (one row a line, the usual way to load a text file; the line breaks
  kept so that the rows put together are the file), its Arrow files written into a fresh temporary
  cache directory (so no earlier run's are read), then `ds.map(encode, batched=True,
  num_proc=1 or 2, load_from_cache_file=False)` where `encode` calls the same tokenizer.json
  through `tokenizers` (`encode_batch`, as `PreTrainedTokenizerFast` would, without pulling in
  transformers), then the ids put together (the Arrow column flattened) and cut into blocks the
  nanoGPT way (one array, then windows), not with run_clm's `group_texts` map, which drops each
  batch's remainder and so would not give dlc's blocks. The per-line split can change a token where a merge would cross a line break;
  `ids_equal_whole` says whether the stream equals the whole-text encoding (dlc's) and
  `ids_differ` how many ids differ.
- `tokenizers-encode`: no `datasets`: `Tokenizer.encode` on the whole text, as dlc does (the
  `tokenizers` crate's `encode_fast`, one call), then the same blocks: the same ids as dlc's.
- `tokenizers-encode-batch`: `Tokenizer.encode_batch` on the lines (Rust threads, RAYON_NUM_THREADS
  = --threads), then the same blocks.
The figures: `prepare_s` (the whole), and its parts `load_s`, `tokenize_s`, `blocks_s`."""
import argparse, os, tempfile, time
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "examples" / "data" / "tinyshakespeare"
VARIANTS = ["datasets-map-np1", "datasets-map-np2", "tokenizers-encode", "tokenizers-encode-batch"]


def blocks(ids, block):
    """dlc's windows: n = (len - 1) // block of them, y shifted by one."""
    import numpy as np
    import torch
    ids = np.asarray(ids, dtype=np.int64)
    n = (len(ids) - 1) // block
    x = torch.from_numpy(ids[: n * block].reshape(n, block).copy())
    y = torch.from_numpy(ids[1: n * block + 1].reshape(n, block).copy())
    return x, y


def with_datasets(text_file, tok_file, num_proc):
    """load_dataset("text") -> map(encode, batched) -> one id stream; returns (ids, load_s, tokenize_s)."""
    import datasets
    from tokenizers import Tokenizer
    datasets.disable_caching()
    datasets.logging.set_verbosity_error()
    datasets.disable_progress_bars()
    with tempfile.TemporaryDirectory(prefix="tokenize-peer-") as cache:
        t0 = time.perf_counter()
        ds = datasets.load_dataset("text", data_files=str(text_file), split="train", keep_linebreaks=True, cache_dir=cache)
        t1 = time.perf_counter()
        tok = Tokenizer.from_file(str(tok_file))

        def encode(batch):
            return {"input_ids": [e.ids for e in tok.encode_batch(batch["text"], add_special_tokens=False)]}

        ds = ds.map(encode, batched=True, num_proc=None if num_proc == 1 else num_proc, remove_columns=["text"],
                    load_from_cache_file=False)
        # Straight from the Arrow column (row by row through the numpy format takes seconds).
        ids = ds.with_format("arrow")[:]["input_ids"].combine_chunks().flatten().to_numpy()
        t2 = time.perf_counter()
    return ids, t1 - t0, t2 - t1


def with_tokenizers(text_file, tok_file, batch):
    """Tokenizer.encode on the whole text, or encode_batch on its lines; (ids, load_s, tokenize_s)."""
    from tokenizers import Tokenizer
    t0 = time.perf_counter()
    text = text_file.read_text(encoding="utf-8")
    tok = Tokenizer.from_file(str(tok_file))
    t1 = time.perf_counter()
    if batch:
        ids = [i for e in tok.encode_batch(text.splitlines(keepends=True), add_special_tokens=False) for i in e.ids]
    else:
        ids = tok.encode(text, add_special_tokens=False).ids
    return ids, t1 - t0, time.perf_counter() - t1


def whole_text_ids(text_file, tok_file):
    """The reference stream (dlc's): the whole file encoded at once; outside the timer."""
    from tokenizers import Tokenizer
    return Tokenizer.from_file(str(tok_file)).encode(text_file.read_text(encoding="utf-8"), add_special_tokens=False).ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--variants", nargs="*", default=VARIANTS, choices=VARIANTS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--text", default=str(DATA_DIR / "input.txt"))
    ap.add_argument("--tokenizer", default=str(DATA_DIR / "tokenizer.json"))
    args = ap.parse_args()
    # The tokenizers library runs encode_batch on rayon's pool: the same thread count as dlc's.
    os.environ.setdefault("RAYON_NUM_THREADS", str(args.threads))
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # a local file: nothing to fetch
    import numpy as np
    from common import emit, set_threads
    set_threads(args.threads)
    text_file, tok_file = Path(args.text), Path(args.tokenizer)
    import tokenizers  # noqa: F401 - imported before the timer, as dlc's start-up is not timed either
    if any(v.startswith("datasets") for v in args.variants):
        import datasets  # noqa: F401
    for variant in args.variants:
        t0 = time.perf_counter()
        if variant.startswith("datasets-map"):
            ids, load_s, tok_s = with_datasets(text_file, tok_file, int(variant[-1]))
        else:
            ids, load_s, tok_s = with_tokenizers(text_file, tok_file, batch=variant.endswith("batch"))
        t1 = time.perf_counter()
        x, y = blocks(ids, args.block)
        t2 = time.perf_counter()
        ref = np.asarray(whole_text_ids(text_file, tok_file), dtype=np.int64)
        got = np.asarray(ids, dtype=np.int64)
        same = len(ref) == len(got) and bool((ref == got).all())
        differ = int((ref[:min(len(ref), len(got))] != got[:min(len(ref), len(got))]).sum()) + abs(len(ref) - len(got))
        emit("tokenize", variant, {"block": args.block, "blocks": x.shape[0], "tokens": len(got), "whole_text_tokens": len(ref)},
             prepare_s=round(t2 - t0, 4), load_s=round(load_s, 4), tokenize_s=round(tok_s, 4),
             blocks_s=round(t2 - t1, 4), ids_equal_whole=same, ids_differ=differ)


if __name__ == "__main__":
    main()
