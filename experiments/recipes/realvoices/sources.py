"""The real voices: credited human recordings shipped by Debian packages, one row per voice.

A *voice* is one speaker in one language (Allison Smith reads English and Spanish: two voices, one
speaker). Every fact below was read from the package itself (bookworm, the versions in ``version``):
the licence is the ``License:`` field of ``/usr/share/doc/PACKAGE/copyright`` as written there (or
its licence text named: ``GPL-2`` for "version 2 dated June, 1991"), the credit line paraphrases that
file's credits (for Tux Paint, the upstream ``changelog.gz``; for Fish Fillets, the game's credits image).

How the gender label is known (``gender_basis``), never from the audio:

- ``stated``: the package says it. Debian installs asterisk prompts under
  ``LANG_COUNTRY_GENDER_VOICE`` folders (``en_US_f_Allison``, ``it_IT_m_Carlo``).
- ``given name``: the package credits a named narrator and does not state a gender; the label is
  read from the credited given name. A label that the audio's pitch decided would make an F0
  baseline circular, so an uncredited voice is left out, however clear its pitch.

A second attribute, ``locale`` (the language's regional variety, ``LANG_COUNTRY``), is recorded
only where the package states it: the asterisk folder names (``en_US_f_Allison``: US English,
``es_MX_f_Allison``: Mexican Spanish, ``fr_CA_f_June``: Canadian French) and Tux Paint's
changelog ("British English descriptive sounds for numbers": ``en_GB``). Elsewhere it is left
empty, and the manifest has no ``locale`` for those voices: a narrator's name or a package's
country of origin says nothing certain about how they speak. With one or two voices per locale it
is for trying ``--attribute locale`` end to end, not for conclusions (``docs/attributes.md``).

Left out for that reason: Tux Paint's Catalan and Dutch descriptions (no narrator credited for
them; Pere Pujal is credited for the Catalan translation), its Lithuanian letters and Malayalam
words, and ``pocketsphinx-testdata`` (LibriVox and "cards" readers, unnamed). Tux Paint's number
stamps: the Spanish numbers (the changelog credits Gabriel Gazzan and says "His son did the
sounds", unnamed), the Norwegian ones ("Norwegian math sounds", not which of nb and nn), and the
Japanese ones (credited "Japanese sounds for the number stamps. TOYAMA Shin-ichi", a contributor
rather than a named voice: their median F0, 263 Hz, is not an adult man's, so the credit does not
say whose voice it is). Fish Fillets NG's Dutch dialogues (``fillets-ng-data-nl``) credit no voice.

Fish Fillets NG's Czech dialogues (``fillets-ng-data-cs``) are credited in the game's own credits,
an image in ``fillets-ng-data`` (``images/menu/credits.png``, "Voices & Animal sounds"), each name
beside the fish it voices; the dialog scripts (``script/LEVEL/dialogs_cs.lua``) say which fish
speaks each line (its font).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

TEXT_QUALITIES = ("exact", "approximate", "meaning")
GENDER_BASES = ("stated", "given name")

ASTERISK_VERSION = "1.6.1-1"
TUXPAINT_VERSION = "2022.06.04-1"
TUXPAINT_STAMPS = "usr/share/tuxpaint/stamps"
TUXPAINT_CREDIT_SOURCE = "/usr/share/doc/tuxpaint-stamps-default/changelog.gz"


def asterisk_sounds(folder: str) -> str:
    return f"usr/share/asterisk/sounds/{folder}"


def core_sounds_text(language: str) -> str:
    """Where ``asterisk-core-sounds-LANG`` keeps the transcript of its prompts."""
    return f"usr/share/doc/asterisk-core-sounds-{language}/core-sounds-{language}.txt.gz"


@dataclass(frozen=True)
class Voice:
    """One speaker in one language, and everything needed to fetch, transcribe and credit it."""

    key: str  # unique, used in utterance ids and folder names
    speaker: str  # the person (shared by a speaker's voices, so leave-one-speaker-out holds them out together)
    name: str  # as credited
    language: str  # ISO 639-1
    gender: str
    gender_basis: str  # one of GENDER_BASES
    gender_source: str  # where the label comes from, quoted
    package: str  # the package holding the audio
    version: str  # the version this row was written from
    dataset: str  # the source package family (the manifest's dataset)
    licence: str  # the copyright file's License field, as written there
    credit: str  # the attribution to show with any use
    audio_root: str  # folder inside the unpacked package
    suffix: str  # a clip is a file under audio_root ending in this; its key is the rest of its path
    transcripts: str  # "asterisk" (a key: text file), "tuxpaint" (the stamp's .txt, the language's line) or "fillets" (the level's dialogs)
    transcript_package: str  # the package holding the transcripts (asterisk) or the package itself
    transcript_file: str  # inside transcript_package (asterisk); empty for tuxpaint
    text_quality: str  # one of TEXT_QUALITIES: how well the transcript matches what is said
    sample_rate: int  # of the packaged audio (Hz)
    channel: str  # how the audio was made and coded
    locale: str = ""  # LANG_COUNTRY where the package states it (the manifest's extra.locale); empty where it does not
    transcript_key: str = ""  # tuxpaint: the .txt line's locale when it is not the language (en_GB); empty: the language
    speaker_tag: str = ""  # fillets: the dialog font of this voice's lines (font_big); empty: every clip is this voice's

    @property
    def packages(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.package, self.transcript_package)))


def _core_sounds(key, speaker, name, language, gender, folder, licence, credit) -> Voice:
    return Voice(
        key=key,
        speaker=speaker,
        name=name,
        language=language,
        gender=gender,
        gender_basis="stated",
        gender_source=f"folder {folder}",
        package=f"asterisk-core-sounds-{language}-g722",
        version=ASTERISK_VERSION,
        dataset="asterisk-core-sounds",
        licence=licence,
        credit=credit,
        audio_root=asterisk_sounds(folder),
        suffix=".g722",
        transcripts="asterisk",
        transcript_package=f"asterisk-core-sounds-{language}",
        transcript_file=core_sounds_text(language),
        text_quality="exact",
        sample_rate=16_000,
        channel="telephone prompt, studio read, G.722",
        locale="_".join(folder.split("_")[:2]),  # stated by the folder's LANG_COUNTRY (en_US_f_Allison)
    )


def _tuxpaint(speaker, name, language, gender, credited) -> Voice:
    return Voice(
        key=f"tuxpaint-{language}",
        speaker=speaker,
        name=name,
        language=language,
        gender=gender,
        gender_basis="given name",
        gender_source=f"credited in {TUXPAINT_CREDIT_SOURCE}: {credited!r}",
        package="tuxpaint-stamps-default",
        version=TUXPAINT_VERSION,
        dataset="tuxpaint-stamps",
        licence="GPL-2",
        credit=f"Tux Paint stamp descriptions ({language}) read by {name}; Tux Paint stamps (C) 2002-2022 Bill Kendrick and contributors",
        audio_root=TUXPAINT_STAMPS,
        suffix=f"_desc_{language}.ogg",
        transcripts="tuxpaint",
        transcript_package="tuxpaint-stamps-default",
        transcript_file="",
        # the descriptions are translated in the .txt files and recorded separately: a translation
        # updated after the recording no longer matches it word for word
        text_quality="approximate",
        sample_rate=44_100,
        channel="volunteer recording for children's software, Ogg Vorbis",
    )


def _tuxpaint_numbers(speaker, name, language, tag, gender, credited, locale="") -> Voice:
    """The spoken numbers 0-9 of Tux Paint's number stamps (``symbols/math/N_TAG.ogg``), the
    transcript the stamp's ``TAG.utf8=`` line: a stamp description voice's record but for these."""
    return replace(
        _tuxpaint(speaker, name, language, gender, credited),
        key=f"tuxpaint-numbers-{language}",
        credit=f"Tux Paint number stamps ({language}) spoken by {name}; Tux Paint stamps (C) 2002-2022 Bill Kendrick and contributors",
        audio_root=f"{TUXPAINT_STAMPS}/symbols/math",
        suffix=f"_{tag}.ogg",
        text_quality="exact",  # the number's name
        locale=locale,
        transcript_key=tag,
    )


FILLETS_VERSION = "1.0.1-1.1"
FILLETS_CREDITS = "/usr/share/games/fillets-ng/images/menu/credits.png"  # in fillets-ng-data: the game's credits, an image
FILLETS_CREDIT = (
    "Fish Fillets - Next Generation, Czech voices; the original game (C) ALTAR interactive, released under the GNU GPL; Altar's "
    "credits, 'Voices & Animal sounds': Vít Musil (the big fish), Gabriela Pyšná (the small fish), Jaroslav Tuček; recorded at Eliot Studios"
)


def _fillets(speaker, name, gender, font, fish) -> Voice:
    """One of the two fish of Fish Fillets NG's Czech dialogues (``fillets-ng-data-cs``): its lines are
    the level dialogs written in ``font`` (``script/LEVEL/dialogs_cs.lua``, in ``fillets-ng-data``),
    their Czech text the transcript."""
    return Voice(
        key=f"{speaker}-cs",
        speaker=speaker,
        name=name,
        language="cs",
        gender=gender,
        gender_basis="given name",
        gender_source=f"fillets-ng-data's credits image {FILLETS_CREDITS}, 'Voices & Animal sounds': {name} beside the {fish}; "
        f"the {fish}'s lines are the dialogs in {font} (script/LEVEL/dialogs_cs.lua)",
        package="fillets-ng-data-cs",
        version=FILLETS_VERSION,
        dataset="fillets-ng",
        licence="GPL-2",  # the copyright file: GNU General Public License, version 2 dated June, 1991
        credit=f"{name}, the {fish}: {FILLETS_CREDIT}",
        audio_root="usr/share/games/fillets-ng/sound",
        suffix=".ogg",
        transcripts="fillets",
        transcript_package="fillets-ng-data",
        transcript_file="usr/share/games/fillets-ng/script",
        text_quality="approximate",  # the Czech script the actors read; a performance may depart from it
        sample_rate=22_050,
        channel="game dialogue, studio recording, Ogg Vorbis",
        speaker_tag=font,
    )


ALLISON_CREDIT = "Recorded by Allison Smith (http://www.theivrvoice.com); financial contributions by Digium, Inc. (http://www.digium.com)"

VOICES: tuple[Voice, ...] = (
    _core_sounds(
        "allison-smith-en",
        "allison-smith",
        "Allison Smith",
        "en",
        "female",
        "en_US_f_Allison",
        "CC-BY-SA-3.0",
        ALLISON_CREDIT,
    ),
    _core_sounds(
        "allison-smith-es",
        "allison-smith",
        "Allison Smith",
        "es",
        "female",
        "es_MX_f_Allison",
        "CC-BY-SA-3.0",
        ALLISON_CREDIT,
    ),
    _core_sounds(
        "june-wallack-fr",
        "june-wallack",
        "June Wallack",
        "fr",
        "female",
        "fr_CA_f_June",
        "CC-BY-SA-3.0",
        "Recorded by June Wallack (http://www.junewallack.com); translated into French by Clod Patry, Kristopher Lalletti and "
        "June Wallack; financial contributions by Digium, Inc., Unlimitel and BGM Informatique",
    ),
    _core_sounds(
        "carlo-flora-it",
        "carlo-flora",
        "Carlo Flora",
        "it",
        "male",
        "it_IT_m_Carlo",
        "CC-BY-3.0",
        "Recorded by Carlo Flora (http://www.carloflora.com, http://www.segreterietelefoniche.it); translated by Silvia Petrin",
    ),
    _core_sounds(
        "ivrvoice-ru",
        "ivrvoice-ru",
        "IvrvoiceRU voice (not named)",
        "ru",
        "female",
        "ru_RU_f_IvrvoiceRU",
        "CC-BY-3.0",
        "Provided by Maxim Topal, http://www.ivrvoice.ru",
    ),
    Voice(
        key="menardi-it",
        speaker="paola-dal-zot",
        name="Paola Dal Zot",
        language="it",
        gender="female",
        gender_basis="stated",
        gender_source="folder it_IT_f_Menardi; the copyright file names 'Paola Dal Zot (?the voice?)', the author's wife ('mia moglie')",
        package="asterisk-prompt-it-menardi-wav",
        version="1:1.4.22+mm20110907-3.1",
        dataset="asterisk-prompt-it",
        licence="CC-SA-BY-3.0",  # the copyright file's spelling; its comment: Creative Commons Attribution Share Alike 3.0 Italian
        # the author's stated condition: show end users that he and his wife made the files, with the site's address
        credit="Sound files made by Marco Menardi and Paola Dal Zot, http://www.voip.ammdomus.it",
        audio_root=asterisk_sounds("it_IT_f_Menardi"),
        suffix=".wav",
        transcripts="asterisk",
        transcript_package="asterisk-core-sounds-it",
        transcript_file=core_sounds_text("it"),
        text_quality="approximate",  # the texts Carlo Flora read: the same Italian prompts, recorded from another translation
        sample_rate=8_000,
        channel="telephone prompt, 8 kHz PCM",
        locale="it_IT",  # the folder it_IT_f_Menardi
    ),
    Voice(
        key="armelle-desjardins-fr",
        speaker="armelle-desjardins",
        name="Armelle Desjardins",
        language="fr",
        gender="female",
        gender_basis="given name",
        gender_source="copyright file: 'Voice actor: Armelle Desjardins'",
        package="asterisk-prompt-fr-armelle",
        version="20070613-2.2",
        dataset="asterisk-prompt-fr-armelle",
        licence="BSD-style (Copyright (C) 2006 Michel Gutierrez; redistribution with the notice kept)",
        credit="Voice actor Armelle Desjardins; copyright (C) 2006 Michel Gutierrez",
        audio_root=asterisk_sounds("fr"),
        suffix=".gsm",
        transcripts="asterisk",
        transcript_package="asterisk-core-sounds-fr",
        transcript_file=core_sounds_text("fr"),
        text_quality="meaning",  # June Wallack's French texts of the same prompts, another translation
        sample_rate=8_000,
        channel="telephone prompt, 8 kHz GSM 06.10",
    ),
    Voice(
        key="july-jimenez-es",
        speaker="july-jimenez",
        name="July E. Jiménez",
        language="es",
        gender="female",
        gender_basis="given name",
        gender_source="LEEME: 'Sonidos grabados por Avatar Ltda. con la voz de July E. Jiménez'",
        package="asterisk-prompt-es-co",
        version="0.20070403-2.1",
        dataset="asterisk-prompt-es-co",
        licence="GPL-2",  # "version 2 dated June, 1991" (copyright file and LEEME)
        credit="Recorded by Avatar Ltda. (http://www.avatar.com.co/) with the voice of July E. Jiménez",
        audio_root=asterisk_sounds("es"),
        suffix=".gsm",
        transcripts="asterisk",
        transcript_package="asterisk-core-sounds-es",
        transcript_file=core_sounds_text("es"),
        text_quality="meaning",  # Allison Smith's Mexican Spanish texts of the same prompts, another translation
        sample_rate=8_000,
        channel="telephone prompt, 8 kHz GSM 06.10",
    ),
    _tuxpaint("estefania-ortiz", "Estefanía Ortiz", "es", "female", "Descriptive sounds Estefanía Ortiz"),
    _tuxpaint("kiriaki-serafeim", "Kiriaki Serafeim", "el", "female", "Greek descriptive sounds Kiriaki SERAFEIM"),
    _tuxpaint("kseniya-buraya", "Kseniya Buraya", "be", "female", "Descriptive sounds by Kseniya Buraya"),
    _tuxpaint("tabbytha", "Tabbytha", "ro", "female", "Descriptive sounds by GCI students ... Romanian: Tabbytha"),
    _tuxpaint("krasimir-petkov", "Krasimir Petkov", "bg", "male", "Descriptive sounds Krasimir Petkov"),
    _tuxpaint("joe-dalton", "Joe Dalton", "da", "male", "Danish descriptive sounds Joe Dalton"),
    _tuxpaint("edwin-veber", "Edwin Veber", "ru", "male", "Descriptive sounds by GCI students ... Rusian: Edwin Veber"),
    # the changelog credits the number sounds as it credits the descriptions above ("Descriptive sounds
    # Krasimir Petkov"); where it names someone else as the voice ("(His son did the sounds)") the voice is left out
    _tuxpaint_numbers(
        "john-arundel", "John Arundel", "en", "en_GB", "male", "British English descriptive sounds for numbers and letters John Arundel", "en_GB"
    ),
    _fillets("vit-musil", "Vít Musil", "male", "font_big", "big fish"),
    _fillets("gabriela-pysna", "Gabriela Pyšná", "female", "font_small", "small fish"),
    # two credited French narrators and no record of who read which file: one speaker id for both,
    # so a held-out fold never trains on either
    _tuxpaint(
        "jacques-chion-paulk",
        "Jacques Chion or PaulK",
        "fr",
        "male",
        "French description sounds Jacques Chion; Descriptive sounds by GCI students ... French: PaulK",
    ),
)

LANGUAGES: tuple[str, ...] = tuple(sorted({voice.language for voice in VOICES}))


def voices_for(languages: tuple[str, ...] | None = None, voices: tuple[Voice, ...] = VOICES) -> tuple[Voice, ...]:
    """The voices speaking one of ``languages`` (all when None), in table order."""
    if languages is None:
        return voices
    unknown = sorted(set(languages) - {voice.language for voice in voices})
    if unknown:
        raise ValueError(f"no real voice speaks {', '.join(unknown)}; the languages are {', '.join(LANGUAGES)}")
    return tuple(voice for voice in voices if voice.language in languages)
