"""Small corpora (issue 45, item 5): the stratified split's shared speakers are counted on the
balanced splits the probe reads, and a task that only the stratified split takes is said to be so."""

from probing.data import speaker_disjoint_refusal, speaker_stratified_splits


def metadata(voices: dict[str, tuple[str, int]], language: str = "fr") -> tuple[dict, list[str]]:
    """speaker -> (gender, utterances), as a store's metadata."""
    rows = [(speaker, gender) for speaker, (gender, count) in voices.items() for _ in range(count)]
    ids = [f"{speaker}-{n}" for n, (speaker, _) in enumerate(rows)]
    columns = {"gender": [g for _, g in rows], "speaker": [s for s, _ in rows], "language": [language] * len(rows), "split": [None] * len(rows)}
    return columns, ids


def test_shared_speakers_are_those_left_in_the_balanced_test_split():
    # one male voice of 5 utterances (1 to test), three female voices of 5 (1 each to test):
    # balancing keeps one female test utterance, so one female speaker, not three, is shared in test
    columns, ids = metadata({"m1": ("male", 5), "f1": ("female", 5), "f2": ("female", 5), "f3": ("female", 5)})
    splits = speaker_stratified_splits(columns, ids, "female-male", seed=0)
    test_speakers = sorted(set(splits.test.speakers.tolist()))
    assert len(splits.test.ids) == 2 and len(test_speakers) == 2
    assert splits.shared_speakers["test"] == test_speakers


def test_a_task_no_speaker_disjoint_split_takes_is_named_with_both_refusals():
    columns, ids = metadata({"m1": ("male", 5), "f1": ("female", 5), "f2": ("female", 5)})
    refused = speaker_disjoint_refusal(columns, ids, "female-male", 0, "fr", dev_needed=False)
    assert refused.startswith(
        "the fixed split: the speakers in language fr (the manifest gives no train and test split): the fixed split needs at least 2 male"
    )
    assert "; leave-one-speaker-out: leave-one-speaker-out in language fr needs at least 2 male speakers (one held out, one to train on), got 1 (m1;" in refused


def test_no_refusal_where_a_speaker_disjoint_split_can_run():
    columns, ids = metadata({"m1": ("male", 5), "m2": ("male", 5), "f1": ("female", 5), "f2": ("female", 5)})
    assert speaker_disjoint_refusal(columns, ids, "female-male", 0, None, dev_needed=False) is None  # leave-one-speaker-out takes it
