"""The head the tests' study files of the toy corpus share."""


def toy_study_head(name: str, manifests: str, family: str = "whisper") -> str:
    """The head of a study template (text for ``str.format``, so its braces doubled): the study
    ``name`` under runs/NAME on the cpu, the tiny random ``family`` model at encoder.final, and the
    corpus toy (asr) of the parts ``manifests`` (``en: toy-en.jsonl, fr: toy-fr.jsonl``)."""
    return (
        f"name: {name}\n"
        f"out: runs/{name}\n"
        "device: cpu\n"
        "models:\n"
        f"  - {{{{name: tiny, family: {family}, checkpoint: tiny-random, sites: [encoder.final]}}}}\n"
        "corpora:\n"
        f"  - {{{{name: toy, task: asr, manifests: {{{{{manifests}}}}}}}}}\n"
    )
