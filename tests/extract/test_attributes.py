"""An attribute task as part of a file name (:func:`extract.attributes.task_file_name`): readable
where the names allow it, escaped and told apart by a digest where they do not."""

from __future__ import annotations

import hashlib

import pytest

from extract.attributes import task_file_name


@pytest.mark.parametrize(
    "task, expected",
    [
        ("female-male", "female-male"),
        ("other-male", "other-male"),
        ("attribute:age", "age"),
        ("attribute:age:teens,thirties", "age_teens-thirties"),
        ("attribute:accent:north,west,south", "accent_north-west-south"),
        ("attribute:age:20,30", "age_20-30"),
    ],
)
def test_plain_names_are_kept_as_spelled(task, expected):
    assert task_file_name(task) == expected


def test_other_characters_are_escaped_and_the_task_is_told_apart_by_its_digest():
    task = "attribute:accent:United States,England/Wales"
    digest = hashlib.sha256(task.encode()).hexdigest()[:8]
    assert task_file_name(task) == f"accent_United.States-England.Wales_{digest}"
    spelled_otherwise = task_file_name("attribute:accent:United_States,England/Wales")
    assert spelled_otherwise != task_file_name(task) and spelled_otherwise.startswith("accent_United.States-England.Wales_")
    assert "/" not in task_file_name("attribute:a/b") and ":" not in task_file_name("attribute:x:a:b,c")


def test_an_escaped_name_never_equals_a_plain_one():
    """A plain name holds at most one ``_`` (attribute, then values); an escaped one two."""
    plain = task_file_name("attribute:a:b-c,d")  # '-' is escaped: not a plain name
    assert plain.count("_") == 2 and task_file_name("attribute:a:b,c") == "a_b-c"


def test_a_long_task_is_cut_and_told_apart_by_its_digest():
    """Fifty groups of a gap (a study's gap_NAME_A-B-...-CORPUS-KEY.counts.jsonl, a scatter's name) would
    pass the 255 bytes a file name may have: the name is cut to FILE_NAME_CHARS, and ends with ``__``
    and the task's digest (``__`` is in no other name, so it equals none)."""
    from extract.attributes import FILE_NAME_CHARS

    many = "attribute:accent:" + ",".join(f"value{k:03d}" for k in range(50))
    digest = hashlib.sha256(many.encode()).hexdigest()[:8]
    name = task_file_name(many)
    assert len(name) <= FILE_NAME_CHARS <= 160 and name.startswith("accent_value000-value001-") and name.endswith(f"__{digest}")
    assert task_file_name(many.rsplit(",", 1)[0]) != name and name.count("__") == 1
    unicode = "attribute:accent:" + ",".join("日本" * 20 + str(k) for k in range(20))
    assert len(task_file_name(unicode)) <= FILE_NAME_CHARS and task_file_name(unicode).isascii()
    assert task_file_name("attribute:" + "a" * 300) == "a" * (FILE_NAME_CHARS - 10) + "__" + hashlib.sha256(("attribute:" + "a" * 300).encode()).hexdigest()[:8]
