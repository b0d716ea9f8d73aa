"""More credited male voices (issue 45, item 7): Fish Fillets NG's Czech fish and Tux Paint's British
English numbers; the dialog parser, a fake build of each kind, and the table's credits."""

import json
from collections import Counter
from dataclasses import replace

import soundfile

from experiments.recipes.realvoices.build import build_realvoices
from experiments.recipes.realvoices.sources import VOICES, voices_for
from experiments.recipes.realvoices.transcripts import parse_fillets_dialogs
from extract.manifest import read_manifest
from tests.experiments.realvoices.test_realvoices import _tone

DIALOGS = r"""
dialogId("lev-v-ahoj", "font_big", "Hello.")
dialogStr("Ahoj, jak se \"máš\"?")


dialogId("lev-m-nazdar", "font_small", "Hi.")
dialogStr("Nazdar.")

dialogId("lev-c-1", "", "")
dialogStr("")
"""


def test_fillets_dialogs_are_read_with_their_font_and_translation():
    assert parse_fillets_dialogs(DIALOGS) == {
        "lev-v-ahoj": ("font_big", 'Ahoj, jak se "máš"?'),
        "lev-m-nazdar": ("font_small", "Nazdar."),
    }  # the empty credits entry (no font, no text) is no line


def _fake_fillets(unpacked):
    sound = unpacked / "fake-fillets-cs/usr/share/games/fillets-ng/sound/level/cs"
    sound.mkdir(parents=True)
    for name, hz in (("lev-v-ahoj", 110), ("lev-v-dva", 110), ("lev-m-nazdar", 240), ("lev-x-none", 110)):
        soundfile.write(sound / f"{name}.ogg", _tone(1.0, hz=hz, rate=22_050), 22_050, format="OGG", subtype="VORBIS")
    script = unpacked / "fake-fillets/usr/share/games/fillets-ng/script/level"
    script.mkdir(parents=True)
    lines = DIALOGS + 'dialogId("lev-v-dva", "font_big", "Two.")\ndialogStr("Dva.")\n'
    (script / "dialogs_cs.lua").write_text(lines, encoding="utf-8")


def _fake_numbers(unpacked):
    math = unpacked / "fake-stamps/usr/share/tuxpaint/stamps/symbols/math"
    math.mkdir(parents=True)
    for number, word in enumerate(("Zero.", "One.", "Two.")):
        soundfile.write(math / f"{number}_en_GB.ogg", _tone(0.6, hz=110, rate=44_100), 44_100, format="OGG", subtype="VORBIS")
        soundfile.write(math / f"{number}_de.ogg", _tone(0.6, hz=110, rate=44_100), 44_100, format="OGG", subtype="VORBIS")
        (math / f"{number}.txt").write_text(f"{word}\nen_GB.utf8={word.upper()}\nen.utf8=wrong\n", encoding="utf-8")


def _cache(tmp_path):
    unpacked = tmp_path / "cache" / "unpacked"
    _fake_fillets(unpacked)
    _fake_numbers(unpacked)
    for package in ("fake-fillets-cs", "fake-fillets", "fake-stamps"):
        (unpacked / f"{package}.json").write_text(json.dumps({"package": package, "version": "1.0-1", "deb": f"{package}_1.0-1_all.deb"}))
    return tmp_path / "cache"


def _fakes():
    by_key = {voice.key: voice for voice in VOICES}
    vit = replace(by_key["vit-musil-cs"], package="fake-fillets-cs", transcript_package="fake-fillets")
    gabriela = replace(by_key["gabriela-pysna-cs"], package="fake-fillets-cs", transcript_package="fake-fillets")
    john = replace(by_key["tuxpaint-numbers-en"], package="fake-stamps", transcript_package="fake-stamps")
    return vit, gabriela, john


def test_each_fish_gets_its_own_lines_and_the_numbers_their_locale_s_line(tmp_path):
    rows = build_realvoices(tmp_path / "out", cache=_cache(tmp_path), voices=_fakes(), show_progress=False)
    utterances = read_manifest(tmp_path / "out" / "manifest.jsonl")
    texts = {u.id: (u.speaker, u.gender, u.text) for u in utterances}
    assert texts == {
        "vit-musil-cs.level.cs.lev-v-ahoj": ("vit-musil", "male", 'Ahoj, jak se "máš"?'),
        "vit-musil-cs.level.cs.lev-v-dva": ("vit-musil", "male", "Dva."),
        "gabriela-pysna-cs.level.cs.lev-m-nazdar": ("gabriela-pysna", "female", "Nazdar."),
        "tuxpaint-numbers-en.0": ("john-arundel", "male", "ZERO."),
        "tuxpaint-numbers-en.1": ("john-arundel", "male", "ONE."),
        "tuxpaint-numbers-en.2": ("john-arundel", "male", "TWO."),
    }
    left_out = {row["voice"]: row["left_out"] for row in rows}
    assert left_out["vit-musil-cs"] == {"another speaker's line (its dialog font)": 1, "no transcript": 1}
    assert left_out["gabriela-pysna-cs"] == {"another speaker's line (its dialog font)": 2, "no transcript": 1}
    assert left_out["tuxpaint-numbers-en"] == {}  # the German numbers are another suffix, never listed
    john = next(u for u in utterances if u.speaker == "john-arundel")
    assert john.extra["locale"] == "en_GB" and john.extra["licence"] == "GPL-2" and "John Arundel" in john.extra["credit"]


def test_the_table_holds_seven_credited_male_speakers_each_with_credit_and_licence():
    males = {voice.speaker: voice for voice in VOICES if voice.gender == "male"}
    assert len(males) >= 7, sorted(males)
    for voice in males.values():
        assert voice.name in voice.credit or voice.name.split(" or ")[0] in voice.credit, voice.key
        assert voice.licence and voice.gender_source and voice.version
    assert Counter(voice.gender for voice in voices_for(("cs",))) == {"male": 1, "female": 1}
    assert {voice.speaker for voice in voices_for(("en",))} == {"allison-smith", "john-arundel"}
