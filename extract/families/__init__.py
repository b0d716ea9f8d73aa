"""Model families: one module and one site table each."""

from extract.families.base import Extractor, NonFiniteError, UnknownSiteError
from extract.families.s2t import S2TExtractor
from extract.families.seamless import SeamlessExtractor
from extract.families.whisper import WhisperExtractor
from extract.families.zeroswot import ZeroSwotExtractor

FAMILIES: dict[str, type[Extractor]] = {
    cls.family: cls for cls in (WhisperExtractor, SeamlessExtractor, ZeroSwotExtractor, S2TExtractor)
}

__all__ = ["FAMILIES", "Extractor", "NonFiniteError", "UnknownSiteError"]
