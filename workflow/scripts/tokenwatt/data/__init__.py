"""The data stage: corpus, normalization, the eval split, the tokenizer, chunks and nested token subsets."""
