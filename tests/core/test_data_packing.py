"""core.data.packing through core.data.pipeline's iterators: packed rows (several samples per row,
position ids restarting at 0, segment ids, labels), resumable positions, data-parallel shards,
packed evaluation, and length-grouped batches padded to a few bucket lengths."""
import numpy as np
import pytest

import core.data.pipeline as data
from core.data.pipeline import IGNORE_INDEX, BatchIterator, Sample
from core.data.packing import bucket_length, pack_rows, packing_efficiency, padding_efficiency


def sample(n: int, start: int = 10, prompt: int = 2) -> Sample:
    ids = np.arange(start, start + n, dtype=np.int32)
    labels = ids.copy()
    labels[:prompt] = IGNORE_INDEX
    return Sample(ids, labels)


def lognormal_lengths(n: int, seed: int = 0, top: int = 1000) -> list[int]:
    rng = np.random.default_rng(seed)
    return np.clip(rng.lognormal(np.log(100), 0.8, n).astype(int), 8, top).tolist()


def samples_from(lengths) -> list[Sample]:
    return [sample(n, start=1000 * i + 3) for i, n in enumerate(lengths)]  # every sample distinct


def unpack(batch: dict) -> list[tuple[list[int], list[int]]]:
    """Each sample of a packed batch back as (ids, labels), read through the segment ids, with a
    check that positions restart at 0 and count up inside every segment."""
    out = []
    for row in range(batch["input_ids"].shape[0]):
        seg = batch["segment_ids"][row]
        for s in range(1, int(seg.max()) + 1):
            where = np.flatnonzero(seg == s)
            assert (np.diff(where) == 1).all(), "a segment is contiguous"
            assert batch["position_ids"][row, where].tolist() == list(range(len(where)))
            assert batch["labels"][row, where[0]] == IGNORE_INDEX  # never the previous sample's target
            out.append((batch["input_ids"][row, where].tolist(), batch["labels"][row, where[1:]].tolist()))
        padding = seg == 0
        assert (batch["labels"][row, padding] == IGNORE_INDEX).all()
        assert (batch["attention_mask"][row] == (seg > 0)).all()
    return out


def test_pack_rows_fills_rows_and_keeps_every_sample_once():
    lengths = lognormal_lengths(500)
    rows = pack_rows(lengths, 1024)
    assert sorted(i for row in rows for i in row) == list(range(500))
    assert all(sum(lengths[i] for i in row) <= 1024 for row in rows)
    assert packing_efficiency(lengths, 1024) > 0.9 > 0.2 > padding_efficiency(lengths, 1024)


def test_collate_packed_lays_samples_end_to_end():
    samples = [sample(5), sample(3, start=50), sample(4, start=90)]
    rows = [[(s.input_ids, s.labels) for s in samples[:2]], [(samples[2].input_ids, samples[2].labels)], None]
    batch = data.collate_packed(rows, 10, pad_id=0)
    assert batch["input_ids"].shape == (3, 10) and all(v.dtype == np.int32 for v in batch.values())
    assert batch["segment_ids"].tolist()[0] == [1, 1, 1, 1, 1, 2, 2, 2, 0, 0]
    assert batch["position_ids"].tolist()[0] == [0, 1, 2, 3, 4, 0, 1, 2, 0, 0]
    assert batch["labels"].tolist()[0] == [-100, -100, 12, 13, 14, -100, -100, 52, -100, -100]
    text = data.collate_packed([[(samples[0].input_ids, samples[0].input_ids)] * 2], 10)  # every label trained
    assert text["labels"].tolist()[0] == [-100, 11, 12, 13, 14, -100, 11, 12, 13, 14]
    assert batch["segment_ids"][2].sum() == 0 and batch["attention_mask"][2].sum() == 0
    assert unpack(batch) == [(s.input_ids.tolist(), s.labels[1:].tolist()) for s in samples]


def test_packed_epoch_holds_every_sample_once_with_its_labels():
    samples = samples_from(lognormal_lengths(300, seed=1, top=256))
    it = BatchIterator(samples, 2, seed=3, length=256, packing=True)
    seen = []
    for _ in range(it.micro_batches_per_epoch):
        batch = next(it)
        assert batch["input_ids"].shape == (2, 256)
        seen += unpack(batch)
    assert it.epoch == 1
    expected = {(tuple(s.input_ids), tuple(s.labels[1:])) for s in samples}
    got = [(tuple(ids), tuple(labels)) for ids, labels in seen]
    assert len(got) == len(set(got)) and set(got) <= expected
    # only the rows of the last incomplete micro batch are left out
    assert len(expected) - len(got) < 2 * 256 // 8


def test_packed_positions_resume_and_shard_like_unpacked():
    samples = samples_from(lognormal_lengths(200, seed=2, top=128))
    kwargs = dict(grad_accum_steps=2, seed=5, length=128, packing=True)
    one = BatchIterator(samples, 2, **kwargs)
    first = [next(one) for _ in range(6)]
    resumed = BatchIterator.from_state(BatchIterator(samples, 2, **kwargs).state() | {"index": 4}, samples, 2, **kwargs)
    np.testing.assert_array_equal(next(resumed)["input_ids"], first[4]["input_ids"])
    # two ranks with micro 1 × accum 2 together see the rows one rank sees with micro 2 × accum 2
    ranks = [BatchIterator(samples, 1, grad_accum_steps=2, world_size=2, rank=r, seed=5, length=128, packing=True)
             for r in range(2)]
    single = BatchIterator(samples, 1, grad_accum_steps=4, seed=5, length=128, packing=True)
    for _ in range(3):
        together = [next(ranks[0])["input_ids"] for _ in range(2)] + [next(ranks[1])["input_ids"] for _ in range(2)]
        alone = [next(single)["input_ids"] for _ in range(4)]
        for a, b in zip(together, alone):
            np.testing.assert_array_equal(a, b)


def test_packing_is_seeded_per_epoch():
    samples = samples_from(lognormal_lengths(120, seed=4, top=128))
    a = BatchIterator(samples, 2, seed=1, length=128, packing=True)
    b = BatchIterator(samples, 2, seed=1, length=128, packing=True)
    np.testing.assert_array_equal(next(a)["input_ids"], next(b)["input_ids"])
    c = BatchIterator(samples, 2, seed=2, length=128, packing=True)
    assert not np.array_equal(next(c)["input_ids"], next(BatchIterator(samples, 2, seed=1, length=128,
                                                                        packing=True))["input_ids"])


def test_a_sample_longer_than_the_row_is_refused_not_silently_cut():
    with pytest.raises(ValueError, match="does not fit"):
        BatchIterator([sample(40), sample(10)], 1, length=32, packing=True)


def test_too_few_packed_rows_for_a_global_batch():
    with pytest.raises(data.DataError, match="packed rows are fewer than one global batch"):
        BatchIterator([sample(5)] * 4, 2, length=64, packing=True)


def test_packed_eval_batches_hold_every_sample_once():
    samples = samples_from(lognormal_lengths(50, seed=6, top=64))
    batches = list(data.eval_batches(samples, 4, 64, packing=True))
    got = [item for b in batches for item in unpack(b)]
    assert sorted(got) == sorted((s.input_ids.tolist(), s.labels[1:].tolist()) for s in samples)
    tokens = sum(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in batches)
    unpacked = sum(int((b["labels"][:, 1:] != IGNORE_INDEX).sum()) for b in data.eval_batches(samples, 4, 64))
    assert tokens == unpacked  # the loss is normalised by the same real-token count


def test_group_by_length_batches_similar_lengths_in_bucket_shapes():
    lengths = lognormal_lengths(400, seed=7, top=512)
    samples = samples_from(lengths)
    it = BatchIterator(samples, 8, seed=0, length=512, group_by_length=True)
    shapes, padded, real = set(), 0, 0
    for _ in range(it.micro_batches_per_epoch):
        batch = next(it)
        shapes.add(batch["input_ids"].shape[1])
        padded += batch["input_ids"].size
        real += int(batch["attention_mask"].sum())
    assert shapes <= {bucket_length(n, 512) for n in range(1, 513)} and len(shapes) <= 8
    plain = BatchIterator(samples, 8, seed=0, length=512)
    assert it.micro_batches_per_epoch == plain.micro_batches_per_epoch == 400 // 8
    assert real / padded > 2 * padding_efficiency(lengths, 512)


def test_bucket_lengths_are_multiples_of_16_up_to_the_max():
    assert [bucket_length(n, 256) for n in (1, 32, 33, 250)] == [32, 32, 64, 256]
    assert bucket_length(700, 1024) == 768 and bucket_length(1024, 1024) == 1024


def test_packing_and_grouping_exclude_each_other():
    with pytest.raises(ValueError, match="exclude each other"):
        BatchIterator([sample(5)] * 8, 2, length=16, packing=True, group_by_length=True)


def test_packing_chunks_a_long_text_and_counts_it_as_without_packing(tmp_path_factory):
    """A sample longer than max_seq_len is cut to max_seq_len at tokenization and counted in the
    stats, packed or not; the packed row then carries the cut sample (alone, since it fills it)."""
    from core.spec.config import DataSettings
    from core.data.tokenizer import Tokenizer
    from tests.core.test_data import make_tokenizer_dir, write_jsonl
    tok = Tokenizer.from_dir(make_tokenizer_dir(tmp_path_factory.mktemp("tok")))
    folder = tmp_path_factory.mktemp("long")
    texts = [f"The cat {i} sleeps." for i in range(12)] + ["A fox met a dog. " * 30]
    path = write_jsonl(folder / "t.jsonl", [{"text": t} for t in texts])
    val = write_jsonl(folder / "v.jsonl", [{"text": "The dog runs."}])
    settings = {"train_file": str(path), "validation_file": str(val), "test_file": None,
                "max_seq_len": 32, "format": "text"}
    plain = data.load_splits(DataSettings(**settings), tok, 0, cache_dir=None)
    packed = data.load_splits(DataSettings(**settings, packing=True), tok, 0, cache_dir=None)
    assert plain.stats.train.chunked == packed.stats.train.chunked == 1  # long text: max_seq_len chunks
    whole = tok.encode(texts[-1]) + [tok.eos_token_id]
    assert len(whole) > 32
    long_sample = max(packed.train, key=len)
    assert long_sample.input_ids.tolist() == whole[:32]
    it = BatchIterator(packed.train, 1, seed=0, length=data.packed_length(32), packing=True)
    rows = [item for _ in range(it.micro_batches_per_epoch) for item in unpack(next(it))]
    assert whole[:32] in [ids for ids, _ in rows]
