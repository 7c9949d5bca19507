"""Build a random-weight tiny Llama (50 M parameters, bf16) and a byte-level BPE tokenizer trained here.

Token timing does not depend on weight values, and ``ignore_eos`` fixes output lengths, so a random-weight
model served by a real vLLM is a faithful target for the measuring client (../shared/REAL-VLLM.md). Nothing is
downloaded: the tokenizer is trained on generated pseudo-English.

Runs inside the vLLM venv, never scoville's: ``VENV/bin/python bench/realvllm/build_model.py OUT_DIR``
(about 2 min, almost all of it BPE training). ``bench/realvllm/server.py`` calls it when the model is missing.
"""
import os
import random
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

OUT = sys.argv[1] if len(sys.argv) > 1 else "/work/realvllm/tiny-llama"
VOCAB = 32000
SEED = 1234

CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{% for message in messages %}"
    "<|{{ message['role'] }}|>\n{{ message['content'] }}</s>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def generated_text(rng: random.Random, n_lines: int = 60000):
    """Pseudo-English: a fixed lexicon of random words, sampled Zipf-like, plus numbers and punctuation."""
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    weights = [12, 9, 8, 7.5, 7, 6.7, 6.3, 6, 5.9, 4.3, 4, 2.8, 2.8,
               2.4, 2.4, 2.2, 2, 2, 1.9, 1.5, 1, .8, .2, .2, .1, .1]
    words_seen: set[str] = set()
    while len(words_seen) < 60000:
        n = rng.randint(2, 11)
        words_seen.add("".join(rng.choices(letters, weights, k=n)))
    lexicon = sorted(words_seen)
    rng.shuffle(lexicon)
    zipf = [1.0 / (i + 1) ** 0.9 for i in range(len(lexicon))]
    punct = [",", ".", ";", ":", "?", "!"]
    for _ in range(n_lines):
        words = rng.choices(lexicon, zipf, k=rng.randint(8, 30))
        parts = []
        for w in words:
            r = rng.random()
            if r < 0.05:
                w = w.capitalize()
            elif r < 0.08:
                w = str(rng.randint(0, 99999))
            parts.append(w)
            if rng.random() < 0.08:
                parts[-1] += rng.choice(punct)
        yield " ".join(parts) + "."


def build_tokenizer(rng: random.Random) -> PreTrainedTokenizerFast:
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB,
        special_tokens=["<unk>", "<s>", "</s>"],  # ids 0, 1, 2
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=1,
        show_progress=False,
    )
    tok.train_from_iterator(generated_text(rng), trainer=trainer)
    assert [tok.token_to_id(t) for t in ("<unk>", "<s>", "</s>")] == [0, 1, 2]
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    # BOS added in front of every encoding (byte-level offsets kept intact).
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]),
    ])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="</s>",
        model_max_length=4096,
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def main():
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    os.makedirs(OUT, exist_ok=True)

    config = LlamaConfig(
        hidden_size=512,
        num_hidden_layers=6,
        num_attention_heads=8,
        num_key_value_heads=4,
        intermediate_size=1408,
        vocab_size=VOCAB,
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=None,
        tie_word_embeddings=False,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    n = sum(p.numel() for p in model.parameters())
    model.save_pretrained(OUT)
    print(f"model: {n / 1e6:.1f} M parameters -> {OUT}")

    tokenizer = build_tokenizer(rng)
    tokenizer.save_pretrained(OUT)
    ids = tokenizer("hello world, this is a test")["input_ids"]
    chat = tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True,
                                         tokenize=False)
    print(f"tokenizer: vocab {len(tokenizer)}, sample ids {ids}, chat {chat!r}")


if __name__ == "__main__":
    main()
