"""The decoder's states at MuST-SHE's gendered words: the words mapped to a decoder-state store's
token rows (:mod:`experiments.decoder.words`) and the probe of speaker gender there
(:mod:`experiments.decoder.probe`, ``speech-gender decoder_probe``)."""
