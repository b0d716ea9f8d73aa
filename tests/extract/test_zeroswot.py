"""ZeroSwot as its authors ran it: the speech-independent BOS/EOS frames of ``post_adapter``, and a
random-init baseline that holds no pretrained wav2vec 2.0 weights and runs the pinned code."""

import json
import textwrap
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from extract.families import tiny_extractor
from extract.families.errors import RemoteCodeError
from extract.families.zeroswot import ZeroSwotExtractor, pretrained_loads_made_random, tiny_model, tiny_wav2vec2_ctc
from extract.manifest import Utterance
from extract.runner import run_extraction
from extract.stage_options import ExtractOptions
from extract.store import ShardReader

REVISION = "0123456789abcdef0123456789abcdef01234567"


def _waves(seconds=(1.0, 1.6, 0.7), seed=0):
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(int(s * 16_000))).astype(np.float32) for s in seconds]


def test_post_adapter_frames_the_speech_with_the_same_bos_and_eos_for_every_utterance():
    extractor = tiny_extractor("zeroswot")
    states = extractor.extract(_waves(), ["post_adapter"])
    embedder = extractor.model.speech_embedder
    for state in (s["post_adapter"] for s in states):
        np.testing.assert_array_equal(state[0], embedder.bos.detach().numpy())
        np.testing.assert_array_equal(state[-1], embedder.eos.detach().numpy())


def test_the_no_special_site_drops_exactly_the_first_and_last_frame():
    extractor = tiny_extractor("zeroswot")
    states = extractor.extract(_waves(), ["post_adapter", "post_adapter_no_special"])  # one batch, different lengths
    assert len({s["post_adapter"].shape[0] for s in states}) > 1
    for state in states:
        full, trimmed = state["post_adapter"], state["post_adapter_no_special"]
        assert trimmed.shape == (full.shape[0] - 2, full.shape[1])
        np.testing.assert_array_equal(trimmed, full[1:-1])
    assert np.isnan(extractor.frame_rate("post_adapter_no_special"))


def test_stored_lengths_shrink_by_two_and_the_remaining_frames_are_unchanged(tmp_path):
    import soundfile

    utterances = []
    for index, wave in enumerate(_waves((0.9, 1.4, 0.6, 1.1))):
        path = tmp_path / "audio" / f"u{index}.wav"
        path.parent.mkdir(exist_ok=True)
        soundfile.write(path, wave, 16_000, subtype="FLOAT")
        utterances.append(Utterance(id=f"u{index}", audio=str(path), language="en", text="x", gender="female" if index % 2 else "male", speaker=f"s{index}"))
    sites = ["post_adapter", "post_adapter_no_special"]
    run_extraction(
        tiny_extractor("zeroswot"), utterances, sites, tmp_path / "store", config={}, show_progress=False, options=ExtractOptions(storage_dtype="float32")
    )
    reader = ShardReader(tmp_path / "store")
    for utterance_id in reader.ids:
        assert reader.length("post_adapter_no_special", utterance_id) == reader.length("post_adapter", utterance_id) - 2
        np.testing.assert_array_equal(reader.get("post_adapter_no_special", utterance_id), reader.get("post_adapter", utterance_id)[1:-1])


REMOTE_CODE = textwrap.dedent('''
    """A ZeroSwot-like hub model whose constructor loads its pretrained wav2vec 2.0, as the config names it."""
    from transformers import PretrainedConfig, PreTrainedModel, Wav2Vec2ForCTC

    from extract.families.zeroswot import CompressionAdapter, SpeechEmbedder, ZeroSwotStandIn


    class StandInZeroSwotConfig(PretrainedConfig):
        model_type = "zero_swot_stand_in"

        def __init__(self, wav2vec2_model_name_or_path="", nllb_model_name_or_path="", embed_dim=24, **kwargs):
            super().__init__(**kwargs)
            self.wav2vec2_model_name_or_path = wav2vec2_model_name_or_path
            self.nllb_model_name_or_path = nllb_model_name_or_path
            self.embed_dim = embed_dim


    class StandInZeroSwotModel(PreTrainedModel):
        config_class = StandInZeroSwotConfig

        def __init__(self, config):
            super().__init__(config)
            self.wav2vec2 = Wav2Vec2ForCTC.from_pretrained(config.wav2vec2_model_name_or_path)
            self.compression_adapter = CompressionAdapter()
            self.speech_embedder = SpeechEmbedder(self.wav2vec2.config.hidden_size, config.embed_dim)

        forward = ZeroSwotStandIn.forward
''')


@pytest.fixture
def hub_repo(tmp_path, monkeypatch):
    """A local 'hub repository' with remote code, whose config names a pretrained tiny wav2vec 2.0."""
    import transformers

    torch.manual_seed(123)
    pretrained = tiny_wav2vec2_ctc()
    pretrained.save_pretrained(tmp_path / "pretrained-w2v")
    repo = tmp_path / "zeroswot_stand_in_repo"
    repo.mkdir()
    (repo / "model.py").write_text(REMOTE_CODE)
    (repo / "config.json").write_text(
        json.dumps(
            {
                "model_type": "zero_swot_stand_in",
                "architectures": ["StandInZeroSwotModel"],
                "auto_map": {"AutoConfig": "model.StandInZeroSwotConfig", "AutoModel": "model.StandInZeroSwotModel"},
                "wav2vec2_model_name_or_path": str(tmp_path / "pretrained-w2v"),
                "nllb_model_name_or_path": "johntsi/nllb-stand-in",
            }
        )
    )
    processor = tiny_model()[1]
    monkeypatch.setattr(transformers.Wav2Vec2Processor, "from_pretrained", classmethod(lambda cls, *a, **k: processor))
    return repo, {name: tensor.clone() for name, tensor in pretrained.state_dict().items()}


def _shared_weights(model: torch.nn.Module, pretrained: dict[str, torch.Tensor]) -> list[str]:
    """Names of weight matrices (2-D and up, never constant at init) equal to the pretrained ones."""
    return [name for name, tensor in model.state_dict().items() if tensor.dim() >= 2 and torch.equal(tensor, pretrained[name])]


def test_the_stand_in_hub_code_would_load_pretrained_weights_without_the_guard(hub_repo):
    from transformers import AutoConfig, AutoModel

    repo, pretrained = hub_repo
    config = AutoConfig.from_pretrained(repo, trust_remote_code=True)
    model = AutoModel.from_config(config, trust_remote_code=True)
    assert len(_shared_weights(model.wav2vec2, pretrained)) == sum(t.dim() >= 2 for t in pretrained.values())


def test_random_init_holds_no_pretrained_wav2vec2_weights_and_says_what_it_replaced(hub_repo, capsys):
    repo, pretrained = hub_repo
    extractor = ZeroSwotExtractor.load(str(repo), revision=REVISION, random_init=True, trust_remote_code=True)
    assert _shared_weights(extractor.model.wav2vec2, pretrained) == []
    assert "Wav2Vec2ForCTC" in capsys.readouterr().err
    assert extractor.nllb_checkpoint == "johntsi/nllb-stand-in"
    (states,) = extractor.extract(_waves((1.0,)), ["pre_adapter", "post_adapter_no_special"])
    assert np.isfinite(states["pre_adapter"]).all()


def test_the_guard_is_removed_afterwards(hub_repo):
    from transformers import PreTrainedModel, Wav2Vec2ForCTC

    repo, pretrained = hub_repo
    before = PreTrainedModel.__dict__["from_pretrained"]
    with pytest.raises(RuntimeError, match="inside"):
        with pretrained_loads_made_random() as replaced:
            Wav2Vec2ForCTC.from_pretrained(repo.parent / "pretrained-w2v")
            assert replaced == [f"Wav2Vec2ForCTC {repo.parent / 'pretrained-w2v'}"]
            raise RuntimeError("inside")
    assert PreTrainedModel.__dict__["from_pretrained"] is before
    loaded = Wav2Vec2ForCTC.from_pretrained(repo.parent / "pretrained-w2v")
    assert len(_shared_weights(loaded, pretrained)) > 0


@pytest.mark.parametrize("random_init", [True, False])
def test_the_pinned_revision_pins_the_code_too(random_init, monkeypatch):
    """Without ``code_revision``, the model code comes from the hub's main whatever ``revision`` says."""
    import transformers
    import transformers.dynamic_module_utils

    calls = []
    model, processor = tiny_model()
    config = SimpleNamespace(auto_map={"AutoModel": "model.ZeroSwotModel"})

    def record(name, result):
        return classmethod(lambda cls, *args, **kwargs: calls.append((name, kwargs)) or result)

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", record("config", config))
    monkeypatch.setattr(
        transformers.dynamic_module_utils, "get_class_from_dynamic_module", lambda *args, **kwargs: calls.append(("code", kwargs)) or (lambda config: model)
    )
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", record("from_pretrained", model))
    monkeypatch.setattr(transformers.Wav2Vec2Processor, "from_pretrained", record("processor", processor))
    ZeroSwotExtractor.load("johntsi/x", revision=REVISION, random_init=random_init, trust_remote_code=True)
    model_calls = [kwargs for name, kwargs in calls if name != "processor"]
    assert [name for name, _ in calls if name != "processor"] == (["config", "code"] if random_init else ["from_pretrained"])
    assert all(kwargs["code_revision"] == REVISION and kwargs["revision"] == REVISION for kwargs in model_calls)
    assert all(kwargs["trust_remote_code"] for name, kwargs in calls if name in ("config", "from_pretrained"))


def test_a_config_without_hub_code_is_one_line(monkeypatch):
    import transformers

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", classmethod(lambda cls, *args, **kwargs: SimpleNamespace(auto_map={})))
    with pytest.raises(RemoteCodeError, match="names no AutoModel class in its auto_map"):
        ZeroSwotExtractor.load("johntsi/x", revision=REVISION, random_init=True, trust_remote_code=True)
