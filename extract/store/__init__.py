"""HDF5 shard store, by role: the on-disk format (:mod:`.format`), checksums and damage
(:mod:`.verify`), the part writer (:mod:`.writer`), a decoder-state store's tokens (:mod:`.tokens`),
the folder as a whole, its configuration and resume (:mod:`.folder`), and the reader (:mod:`.reader`).
The names callers use are re-exported here."""

# ruff: noqa: F401 (the imports below are the re-exports)

from extract.store.folder import IncompleteStoreError, Store, comparable_config, complete_parts, differing_keys, part_content_damage, store_parts
from extract.store.format import DamagedPartError, PartClaim, StoreAttributes, StoreError, part_attributes, part_ids, part_labels, part_name, utterance_meta
from extract.store.reader import ShardReader
from extract.store.tokens import GeneratedTokens, TokenPartWriter
from extract.store.verify import content_checksum, is_complete, part_damage, recorded_checksum
from extract.store.writer import CHUNK_BYTES, PartWriter, all_finite, overflow_error
