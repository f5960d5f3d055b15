"""Trains the byte-level BPE tokenizer bundled with tiny Shakespeare
(examples/data/tinyshakespeare/tokenizer.json), with Hugging Face's `tokenizers`, as GPT-2's is
made: byte-level pre-tokenisation (no prefix space), 512 tokens (the 256 bytes and 256 merges),
merges seen at least twice. `examples/shakespeare_bpe.dl` trains on the ids it gives.

    bench/.venv/bin/pip install tokenizers   # bench/setup.sh installs it
    bench/.venv/bin/python scripts/train_tokenizer.py

Training is deterministic for a given `tokenizers` version (0.23.3 made the bundled file).
"""
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = Path(__file__).resolve().parent.parent
TEXT = ROOT / "examples/data/tinyshakespeare/input.txt"
OUT = ROOT / "examples/data/tinyshakespeare/tokenizer.json"

tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
trainer = trainers.BpeTrainer(
    vocab_size=512,
    min_frequency=2,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    show_progress=False,
)
tok.train([str(TEXT)], trainer)
tok.save(str(OUT))
ids = tok.encode(TEXT.read_text()).ids
print(f"{OUT}: {tok.get_vocab_size()} tokens; input.txt is {len(ids)} ids ({TEXT.stat().st_size / len(ids):.2f} bytes an id)")
