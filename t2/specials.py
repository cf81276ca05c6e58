"""The special tokens of every t2 vocabulary and their ids, which the model (padding), the
searches (BOS, EOS) and the tokenizer (t2.data.tokenizer) share."""

SPECIALS = {"pad": "<pad>", "bos": "<s>", "eos": "</s>", "unk": "<unk>"}  # ids 0, 1, 2, 3
PAD, BOS, EOS, UNK = (list(SPECIALS).index(k) for k in ("pad", "bos", "eos", "unk"))
