"""Activation patching (extract.patching) on tiny random models of every family: the hook replaces exactly the frames
its docstring promises at the chosen site, nothing upstream changes, everything downstream runs on
the patched states, and patching a target with its own states is the identity, bit for bit."""

import numpy as np
import pytest
import torch

from extract.families import tiny_extractor
from extract.families.s2t import S2TGenerator
from extract.families.seamless import SeamlessGenerator
from extract.families.zeroswot import ZeroSwotGenerator
from extract.hooks import capture
from extract.patching import FrameSpan, PatchError, capture_sources, parse_frames, patched_bounds, patched_generation, patched_together
from tests.tiny_whisper import IdWords, tiny_whisper_generator

RATE = 16_000
SITES = ("encoder.embed", "encoder.layer.0", "encoder.layer.1", "encoder.final")


def _audios(seconds, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(0, 0.1, int(s * RATE)).astype(np.float32) for s in seconds]


def _whisper():
    return tiny_whisper_generator(max_new_tokens=8, max_length=12)


def _generate_reading(generator, audios, site=None, sources=None, span=None):
    """Hypotheses and the states at every site of ``SITES`` during one generation (patched at ``site``
    when given; at every one of them together when ``site`` is a list)."""
    table = generator.extractor.site_table()
    with torch.inference_mode(), capture(generator.extractor.model, {name: table[name] for name in SITES}, stop_early=False) as (seen, run):
        if site is None:
            hypotheses, report = run(generator.generate, audios, "en", "asr"), None
        elif isinstance(site, list):
            hypotheses, report = run(patched_together, generator, site, audios, sources, "en", "asr", None, span)
        else:
            hypotheses, report = run(patched_generation, generator, site, audios, sources, "en", "asr", None, span)
    return hypotheses, {name: tensor.numpy() for name, tensor in seen.tensors.items()}, report


@pytest.mark.parametrize("site", SITES)
def test_patching_a_target_with_its_own_states_changes_nothing_bit_for_bit(site):
    generator = _whisper()
    audios = _audios((1.0, 0.6))
    plain, plain_states, _ = _generate_reading(generator, audios)
    sources = capture_sources(generator.extractor, audios, [site], None)
    patched, patched_states, report = _generate_reading(generator, audios, site, sources)
    assert patched == plain
    for name in SITES:
        np.testing.assert_array_equal(patched_states[name], plain_states[name])
    assert report.replaced == [50, 30]  # every speech frame of each (1.0 s and 0.6 s at 50 frames a second)


@pytest.mark.parametrize(
    ("target_seconds", "source_seconds", "upstream", "site", "downstream"),
    [(1.0, 0.6, "encoder.embed", "encoder.layer.0", "encoder.layer.1"), (0.6, 1.0, "encoder.layer.0", "encoder.layer.1", "encoder.final")],
    ids=["shorter source", "longer source"],
)
def test_another_utterance_replaces_the_shorter_one_s_speech_frames_and_changes_only_what_follows(target_seconds, source_seconds, upstream, site, downstream):
    """B patched into A at a site: the frames both have as speech (0.6 s: 30 frames) are B's, A's
    frames from 30 on (A's speech beyond B's length, and the padding) stay A's, a longer B gives no
    more frames than A has speech, the site upstream is A's and the one downstream differs from A's
    plain run."""
    generator = _whisper()
    target, source = _audios((target_seconds,), seed=1), _audios((source_seconds,), seed=2)
    _, plain, _ = _generate_reading(generator, target)
    _, of_source, _ = _generate_reading(generator, source)
    sources = capture_sources(generator.extractor, source, [site], None)
    _, patched, report = _generate_reading(generator, target, site, sources)
    assert (report.start, report.end, report.target_frames, report.replaced) == ([0], [30], [int(target_seconds * 50)], [30])
    np.testing.assert_array_equal(patched[upstream], plain[upstream])
    np.testing.assert_array_equal(patched[site][0, :30], of_source[site][0, :30])
    np.testing.assert_array_equal(patched[site][0, 30:], plain[site][0, 30:])
    assert not np.allclose(patched[downstream], plain[downstream], atol=1e-4)


def test_a_frame_span_replaces_those_frames_and_an_open_span_takes_whisper_s_whole_window():
    generator = _whisper()
    target, source = _audios((1.0,), seed=1), _audios((0.6,), seed=2)
    _, plain, _ = _generate_reading(generator, target)
    _, of_source, _ = _generate_reading(generator, source)
    span = FrameSpan(10, 20)
    sources = capture_sources(generator.extractor, source, ["encoder.layer.0"], span)
    _, patched, report = _generate_reading(generator, target, "encoder.layer.0", sources, span)
    assert report.replaced == [10]
    layer = patched["encoder.layer.0"][0]
    np.testing.assert_array_equal(layer[10:20], of_source["encoder.layer.0"][0, 10:20])
    np.testing.assert_array_equal(np.delete(layer, range(10, 20), axis=0), np.delete(plain["encoder.layer.0"][0], range(10, 20), axis=0))
    whole = parse_frames("0:")
    sources = capture_sources(generator.extractor, source, ["encoder.layer.0"], whole)
    _, patched, report = _generate_reading(generator, target, "encoder.layer.0", sources, whole)
    assert report.replaced == [1500]
    np.testing.assert_array_equal(patched["encoder.layer.0"], of_source["encoder.layer.0"])


def test_the_bounds_rule_and_the_frames_flag():
    assert patched_bounds(None, 50, 30) == (0, 30)
    assert patched_bounds(None, 30, 50) == (0, 30)
    assert patched_bounds(FrameSpan(10, 20), 1500, 1500) == (10, 20)
    assert patched_bounds(FrameSpan(40, None), 50, 30) == (40, 40)  # the source has nothing there: nothing replaced
    assert parse_frames(None) is None and parse_frames("speech") is None
    assert parse_frames("5:9") == FrameSpan(5, 9) and parse_frames(":9") == FrameSpan(0, 9) and str(parse_frames("7:")) == "7:"
    for bad in ("9:5", "a:b", "5"):
        with pytest.raises(PatchError, match="START"):
            parse_frames(bad)


def test_an_unknown_site_is_refused_in_one_line():
    generator = _whisper()
    with pytest.raises(PatchError, match="unknown site 'encoder.layer.9' for whisper; valid sites: encoder.embed"):
        capture_sources(generator.extractor, _audios((0.5,)), ["encoder.layer.9"], None)


def test_a_padding_family_patches_too():
    """S2T pads a batch to its longest input: sources captured alone keep their own frames, and patching
    a target with its own states is still the identity."""
    extractor = tiny_extractor("s2t")
    generator = S2TGenerator(extractor, IdWords(), max_new_tokens=4)
    audios = _audios((1.0, 0.6))
    site = next(name for name in extractor.site_table() if "layer" in name)
    plain = generator.generate(audios, "en", "asr")
    own = capture_sources(extractor, audios, [site], FrameSpan(0), alone=False)
    assert patched_generation(generator, site, audios, own, "en", "asr", None, FrameSpan(0))[0] == plain
    other = capture_sources(extractor, audios[::-1], [site], None, alone=True)
    hypotheses, report = patched_generation(generator, site, audios, other, "en", "asr", None)
    assert len(hypotheses) == 2 and min(report.replaced) > 0


def _seamless():
    extractor = tiny_extractor("seamless")
    extractor.model.generation_config.text_decoder_lang_to_code_id = {"spa": 50, "eng": 51}
    return SeamlessGenerator(extractor, IdWords(), max_new_tokens=4)


def _zeroswot():
    from tests.extract.test_transcribe import IdTokenizer, _tiny_nllb

    return ZeroSwotGenerator(tiny_extractor("zeroswot"), IdTokenizer({"spa_Latn": 60}), _tiny_nllb(), max_new_tokens=4)


@pytest.mark.parametrize("make", [_seamless, _zeroswot], ids=["seamless", "zeroswot"])
def test_every_family_s_editable_sites_patch_and_a_target_s_own_states_are_the_identity(make):
    generator = make()
    extractor = generator.extractor
    table = extractor.site_table()
    editable = [name for name, site in table.items() if site.select is None and site.transform is None]
    audios = _audios((1.0, 0.6))
    plain = generator.generate(audios, "en", "st", "es")
    for site in editable:
        own = capture_sources(extractor, audios, [site], FrameSpan(0))
        assert patched_generation(generator, site, audios, own, "en", "st", "es", FrameSpan(0))[0] == plain, site
    own = capture_sources(extractor, audios, editable, FrameSpan(0))
    assert patched_together(generator, editable, audios, own, "en", "st", "es", FrameSpan(0))[0] == plain  # every site at once
    derived = [name for name in table if name not in editable]
    for site in derived:
        with pytest.raises(PatchError, match="derived view"):
            capture_sources(extractor, audios, [site], None)


def test_a_span_on_a_padding_family_stays_in_the_target_s_own_frames_whatever_its_batch_mates():
    """S2T pads a batch to its longest input: a span (and the speech frames) ends at each target's own
    frames, never in its padding, so a clip's patched output does not depend on the clips beside it."""
    extractor = tiny_extractor("s2t")
    generator = S2TGenerator(extractor, IdWords(), max_new_tokens=4)
    targets, sources = _audios((0.6, 1.0)), _audios((1.0, 1.0), seed=1)
    site = next(name for name in extractor.site_table() if "layer" in name)
    alone = capture_sources(extractor, [targets[0]], [site], FrameSpan(0), alone=True)[0].frames[site]
    for span in (FrameSpan(0), None):
        captured = capture_sources(extractor, sources, [site], span, alone=True)
        together, report = patched_generation(generator, site, targets, captured, "en", "asr", None, span)
        by_itself, own = patched_generation(generator, site, targets[:1], captured[:1], "en", "asr", None, span)
        assert report.target_frames[0] == own.target_frames[0] == alone < report.target_frames[1]
        assert report.end[0] == own.end[0] == alone
        assert together[0] == by_itself[0]


# ---------------------------------------------------------------- several sites in one pass


def test_patching_several_sites_of_a_target_with_its_own_states_changes_nothing_bit_for_bit():
    generator = _whisper()
    audios = _audios((1.0, 0.6))
    plain, plain_states, _ = _generate_reading(generator, audios)
    together = ["encoder.embed", "encoder.layer.1", "encoder.final"]
    sources = capture_sources(generator.extractor, audios, together, None)
    patched, patched_states, reports = _generate_reading(generator, audios, together, sources)
    assert patched == plain
    for name in SITES:
        np.testing.assert_array_equal(patched_states[name], plain_states[name])
    assert {site: report.replaced for site, report in reports.items()} == {site: [50, 30] for site in together}


def test_two_sites_patched_together_are_neither_site_alone():
    """B (0.6 s) into A (1.0 s) at layers 0 and 1 in one pass: layer 1's first 30 frames are B's, as
    when layer 1 is patched alone, but its frames from 30 on (A's speech beyond B's, A's padding) ran
    on layer 0's patch, so they are not what layer 1 alone leaves there; and its first 30 are not
    what layer 0 alone gives there (B's layer 1 exactly, where layer 0 alone leaves A's later frames
    in the attention). The final states differ from both and from the plain run. The tiny random
    model mixes frames weakly (these differences are 1e-7 to 1e-5), so the test asks for inequality,
    exactly: every run is the same deterministic computation on other states."""
    generator = _whisper()
    target, source = _audios((1.0,), seed=1), _audios((0.6,), seed=2)
    _, plain, _ = _generate_reading(generator, target)
    _, of_source, _ = _generate_reading(generator, source)
    both = ["encoder.layer.0", "encoder.layer.1"]
    sources = capture_sources(generator.extractor, source, both, None)
    _, together, reports = _generate_reading(generator, target, both, sources)
    _, first_alone, _ = _generate_reading(generator, target, "encoder.layer.0", sources)
    _, second_alone, _ = _generate_reading(generator, target, "encoder.layer.1", sources)
    assert {site: (report.start, report.end) for site, report in reports.items()} == {site: ([0], [30]) for site in both}
    np.testing.assert_array_equal(together["encoder.layer.0"], first_alone["encoder.layer.0"])
    np.testing.assert_array_equal(together["encoder.layer.1"][0, :30], of_source["encoder.layer.1"][0, :30])
    np.testing.assert_array_equal(together["encoder.layer.1"][0, :30], second_alone["encoder.layer.1"][0, :30])
    assert not np.array_equal(together["encoder.layer.1"][0, 30:], second_alone["encoder.layer.1"][0, 30:])
    assert not np.array_equal(together["encoder.layer.1"][0, :30], first_alone["encoder.layer.1"][0, :30])
    for alone in (first_alone, second_alone, plain):
        assert not np.array_equal(together["encoder.final"], alone["encoder.final"])


def test_several_sites_refuse_a_site_twice_an_unknown_one_or_frames_not_counted_there():
    from extract.patching import target_frames

    extractor = tiny_extractor("s2t")
    generator = S2TGenerator(extractor, IdWords(), max_new_tokens=4)
    audios = _audios((0.6,))
    layer = next(name for name in extractor.site_table() if "layer" in name)
    sources = capture_sources(extractor, audios, [layer], None)
    with pytest.raises(PatchError, match=f"sites {layer}, {layer}: a site is given twice"):
        patched_together(generator, [layer, layer], audios, sources, "en", "asr", None)
    with pytest.raises(PatchError, match="unknown site 'encoder.layer.9'"):
        patched_together(generator, [layer, "encoder.layer.9"], audios, sources, "en", "asr", None)
    counted = target_frames(extractor, audios, ["encoder.final"])
    with pytest.raises(PatchError, match=f"the targets' frames were counted at encoder.final, not at {layer}"):
        patched_together(generator, [layer], audios, sources, "en", "asr", None, None, counted)


# ---------------------------------------------------------------- components: one block's output, not the residual stream


def _final_and_block(generator, audios, block_site=None, sources=None, span=None, component="residual"):
    """The final encoder states, layer 0's input and the patched block's output during one generation
    (patched at ``block_site``'s ``component`` when given)."""
    from extract.patching import component_table

    extractor = generator.extractor
    table = extractor.site_table()
    wanted = {"final": table["encoder.final"], "embed": table["encoder.embed"]}
    if block_site is not None and component != "residual":
        wanted["block"] = component_table(extractor, component)[block_site]
    with torch.inference_mode(), capture(extractor.model, wanted, stop_early=False) as (seen, run):
        if block_site is None:
            run(generator.generate, audios, "en", "asr")
        else:
            run(patched_generation, generator, block_site, audios, sources, "en", "asr", None, span, None, component)
    return {name: tensor.numpy() for name, tensor in seen.tensors.items()}


def test_patching_the_whole_residual_stream_reproduces_the_source_at_every_layer_so_sites_compare_nothing():
    """The audit's P1 on the tiny Whisper: B's residual stream over the whole window at any layer
    gives B's final states bit for bit; the site sweep of ``--component residual`` cannot localise."""
    generator = _whisper()
    target, source = _audios((1.0,), seed=1), _audios((0.6,), seed=2)
    of_source = _final_and_block(generator, source)["final"]
    whole = FrameSpan(0)
    for site in ("encoder.layer.0", "encoder.layer.1"):
        sources = capture_sources(generator.extractor, source, [site], whole)
        np.testing.assert_array_equal(_final_and_block(generator, target, site, sources, whole)["final"], of_source)


@pytest.mark.parametrize("component", ["attention", "mlp"])
@pytest.mark.parametrize("site", ["encoder.layer.0", "encoder.layer.1"])
def test_a_component_patch_moves_one_block_s_output_and_does_not_reproduce_the_source(component, site):
    """B's attention (or MLP) output over the whole window at one layer: the block's output is B's
    exactly, the layer's input stays A's, and the final states are neither B's (the residual stream is
    still A's) nor A's plain ones (the block's contribution moved)."""
    generator = _whisper()
    target, source = _audios((1.0,), seed=1), _audios((0.6,), seed=2)
    plain, of_source = _final_and_block(generator, target), _final_and_block(generator, source)
    whole = FrameSpan(0)
    sources = capture_sources(generator.extractor, source, [site], whole, component=component)
    source_block = sources[0].states[site].numpy()
    patched = _final_and_block(generator, target, site, sources, whole, component)
    np.testing.assert_array_equal(patched["block"][0], source_block)
    np.testing.assert_array_equal(patched["embed"], plain["embed"])
    assert not np.allclose(patched["final"], of_source["final"], atol=1e-6)
    assert not np.array_equal(patched["final"], plain["final"])
    distance_to_source = np.abs(patched["final"] - of_source["final"]).max()
    assert distance_to_source > 1e-3  # far from B's: not the residual patch's bit-identical copy


@pytest.mark.parametrize("component", ["attention", "mlp"])
def test_a_component_self_patch_is_bit_identical(component):
    generator = _whisper()
    audios = _audios((1.0, 0.6))
    plain, plain_states, _ = _generate_reading(generator, audios)
    for site in ("encoder.layer.0", "encoder.layer.1"):
        for span in (None, FrameSpan(0)):
            own = capture_sources(generator.extractor, audios, [site], span, component=component)
            table = generator.extractor.site_table()
            with torch.inference_mode(), capture(generator.extractor.model, {name: table[name] for name in SITES}, stop_early=False) as (seen, run):
                hypotheses, _ = run(patched_generation, generator, site, audios, own, "en", "asr", None, span, None, component)
            assert hypotheses == plain
            for name in SITES:
                np.testing.assert_array_equal(seen.tensors[name].numpy(), plain_states[name])


def test_a_component_is_refused_where_the_site_or_the_family_has_no_such_block():
    from extract.patching import patchable_sites

    generator = _whisper()
    assert patchable_sites(generator.extractor, "mlp") == ["encoder.layer.0", "encoder.layer.1"]
    with pytest.raises(PatchError, match="site encoder.final has no attention block of its own: --component attention patches encoder.layer.K sites"):
        capture_sources(generator.extractor, _audios((0.5,)), ["encoder.final"], None, component="attention")
    with pytest.raises(PatchError, match="seamless declares no mlp block in its encoder layers; patch --component residual, attention"):
        patchable_sites(tiny_extractor("seamless"), "mlp")


@pytest.mark.parametrize("make", [_seamless, _zeroswot], ids=["seamless", "zeroswot"])
def test_every_family_s_declared_components_self_patch_to_the_identity(make):
    from extract.patching import patchable_sites

    generator = make()
    extractor = generator.extractor
    audios = _audios((1.0, 0.6))
    plain = generator.generate(audios, "en", "st", "es")
    for component in type(extractor).layer_components:
        site = patchable_sites(extractor, component)[0]
        own = capture_sources(extractor, audios, [site], FrameSpan(0), alone=True, component=component)
        assert patched_generation(generator, site, audios, own, "en", "st", "es", FrameSpan(0), None, component)[0] == plain, (component, site)
