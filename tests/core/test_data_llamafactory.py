"""Issue 37, data: LLaMA-Factory's data folder as a user points mindtune at it (tests/core/llamafactory_demo.py
makes a synthetic stand-in: the real files cannot be downloaded here). Its preference files honour
data.overlong at max_seq_len 512 (skip and truncate counted and listed, refuse as before), its
pretraining entries read as text, and a file's problems are all named in one pass."""
import json
from pathlib import Path

import numpy as np
import pytest

from core.data.catalog import read_catalog
from core.data.files import DataError, read_data_file
from core.data.formats import Columns
from core.data.pipeline import IGNORE_INDEX, load_splits
from core.data.preference import load_preference_splits
from core.data.pairs import preference_records
from core.data.tokenizer import Tokenizer
from core.spec.config import DataSettings
from tests.core.llamafactory_demo import make_llamafactory_data

ROOT = Path(__file__).resolve().parents[2]
MAX = 512


@pytest.fixture(scope="module")
def tokenizer():
    return Tokenizer.from_dir(ROOT / "models" / "tiny-demo")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return make_llamafactory_data(tmp_path_factory.mktemp("lf") / "data")


def _settings(folder: Path, name: str, **changes) -> DataSettings:
    return DataSettings(**{"train_file": str(folder), "dataset": [name], "validation_file": None, "test_file": None,
                           "validation_fraction": 0.2, "max_seq_len": MAX, **changes})


def _prompt_and_answer(sample, tokenizer) -> tuple[list[int], list[int]]:
    labelled = np.flatnonzero(sample.labels != IGNORE_INDEX)
    return sample.input_ids[:labelled[0]].tolist(), sample.input_ids[labelled[0]:].tolist()


@pytest.mark.parametrize("name, objective", [("dpo_en_demo", "dpo"), ("kto_en_demo", "kto")])
def test_long_preference_records_are_skipped_counted_and_listed(folder, tokenizer, name, objective):
    splits = load_preference_splits(_settings(folder, name, overlong="skip"), tokenizer, 0, objective)
    train, val = splits.stats.train, splits.stats.validation
    # 40 records, 8 held out; every third record has a long multi-turn prompt (1,000-3,000 tokens)
    assert (train.records, val.records) == (32, 8)
    assert (train.overlong_records, val.overlong_records) == (11, 3)
    assert (train.pairs, val.pairs) == (21, 5) and train.skipped == 11 and train.truncated == 0
    assert all(1000 <= tokens <= 3500 for _, tokens in train.overlong_listed)
    assert train.overlong_listed[0][0].endswith(f"{name}.json record [3]")
    assert all(len(p) <= MAX for p in splits.train + splits.validation)
    notes = [str(w) for w in splits.stats.warnings()]
    assert notes[0].startswith(f"train: 11 of 32 records are longer than max_seq_len {MAX} tokens and were skipped "
                               "(data.overlong: skip): ")


@pytest.mark.parametrize("name, objective", [("dpo_en_demo", "dpo"), ("kto_en_demo", "kto")])
def test_long_preference_records_keep_the_end_of_the_prompt_and_cut_the_answers(folder, tokenizer, name, objective):
    splits = load_preference_splits(_settings(folder, name, overlong="truncate"), tokenizer, 0, objective)
    train = splits.stats.train
    assert (train.records, train.pairs, train.overlong_records, train.truncated) == (32, 32, 11, 11)
    assert splits.stats.validation.overlong_records == 3 and train.chosen_max_length > 2000  # lengths before the cut
    assert all(len(p) <= MAX for p in splits.train + splits.validation)
    records = {r.where: r for r in preference_records(read_data_file(folder / f"{name}.json"), "kto" if objective == "kto"
                                                      else "pairs", Columns(read_catalog(folder)[0].columns
                                                                            if objective == "dpo" else
                                                                            read_catalog(folder)[1].columns))}
    cut = [p for p in splits.train if p.where in dict(map(tuple, train.overlong_listed))]
    assert len(cut) == 11
    for pair in cut:
        last_question = records[pair.where].prompt.messages[-1]["content"]
        prompt, answer = _prompt_and_answer(pair.chosen, tokenizer)
        # the end of the prompt is kept: its last turn, the question the answer replies to
        assert last_question in tokenizer.decode(prompt, skip_special_tokens=False)
        assert len(prompt) + len(answer) <= MAX and len(answer) > 0
        if pair.rejected is not None:  # both sides keep the same prompt tokens
            assert _prompt_and_answer(pair.rejected, tokenizer)[0] == prompt
    notes = [str(w) for w in splits.stats.warnings()]
    assert notes[0].startswith(f"train: 11 of 32 records are longer than max_seq_len {MAX} tokens and were truncated "
                               "(the end of the prompt kept, the answers cut to what is left) (data.overlong: "
                               "truncate): ")


def test_refuse_keeps_the_error_that_names_the_prompt(folder, tokenizer):
    with pytest.raises(DataError, match=r"dpo_en_demo.json record \[3\]: field 'chosen': the prompt alone is \d{4} "
                                        r"tokens, which fills data.max_seq_len=512"):
        load_preference_splits(_settings(folder, "dpo_en_demo", overlong="error"), tokenizer, 0, "dpo")


@pytest.mark.parametrize("name", ["wiki_demo", "c4_demo"])
def test_pretraining_entries_read_as_text(folder, tokenizer, name):
    entry = {e.name: e for e in read_catalog(folder)}[name]
    assert entry.formatting == "text" and entry.loadable
    splits = load_splits(_settings(folder, name), tokenizer, 0, cache_dir=None)
    assert splits.stats.train.format == "text" and splits.stats.train.samples + splits.stats.validation.samples == 12
    sample = splits.train[0]
    assert (sample.labels[1:] != IGNORE_INDEX).all()  # every token trained, as pretraining does


def test_an_alpaca_entry_that_renamed_only_its_prompt_stays_alpaca(tmp_path, tokenizer):
    _lines(tmp_path / "qa.jsonl", [{"question": f"Hi {i}?", "output": "Hello."} for i in range(4)])
    (tmp_path / "dataset_info.json").write_text(json.dumps({"qa": {"file_name": "qa.jsonl",
                                                                   "columns": {"prompt": "question"}}}))
    splits = load_splits(DataSettings(train_file=str(tmp_path), dataset=["qa"], validation_file=None,
                                      validation_fraction=0.25, test_file=None), tokenizer, 0, cache_dir=None)
    assert splits.stats.train.format == "alpaca"


def _lines(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def test_every_problem_of_a_pair_file_is_named_in_one_pass(tmp_path):
    good = {"instruction": "Who?", "chosen": "Tom", "rejected": "Ann"}
    records = [good] * 10
    records[3] = {"instruction": "Who?", "chosen": "", "rejected": "Ann"}       # line 4: an empty answer
    records[7] = {"instruction": "Who?", "output": "Tom"}                       # line 8: not a pair
    path = _lines(tmp_path / "pairs.jsonl", records)
    with pytest.raises(DataError) as caught:
        preference_records(read_data_file(path), "pairs")
    message = str(caught.value)
    assert message.startswith(f"2 problems in {path}: {path} line 4: field 'chosen': ")
    assert f"{path} line 8: this record is a plain conversation but {path} line 1 is a preference pair" in message
    many = _lines(tmp_path / "many.jsonl", [good] + [{"instruction": "Who?", "chosen": " ", "rejected": "x"}] * 25)
    with pytest.raises(DataError, match=r"^25 problems in .*many.jsonl line 21: field 'chosen'.*, and 5 more$"):
        preference_records(read_data_file(many), "pairs")


def test_a_plain_file_with_pairs_in_it_names_every_pair(tmp_path):
    from core.data.pairs import file_kind
    plain = {"instruction": "Who?", "output": "Tom"}
    path = _lines(tmp_path / "plain.jsonl", [plain, {**plain, "chosen": "a", "rejected": "b"}, plain,
                                             {**plain, "chosen": "a", "rejected": "b"}])
    with pytest.raises(DataError, match=r"^2 problems in .*plain.jsonl line 2: .*plain.jsonl line 4: this record is a "
                                        r"preference pair"):
        file_kind(read_data_file(path), Columns())


@pytest.mark.slow  # four tiny-demo runs of 2 steps at max_seq_len 512 (~20-40 s each on a loaded 2-core machine)
@pytest.mark.parametrize("name, objective, policy, used", [
    ("dpo_en_demo", "dpo", "skip", (21, 5)), ("dpo_en_demo", "dpo", "truncate", (32, 8)),
    ("kto_en_demo", "kto", "skip", (21, 5)), ("kto_en_demo", "kto", "truncate", (32, 8))])
def test_the_demo_files_train_at_512_with_skip_and_truncate(folder, tmp_path, name, objective, policy, used):
    """Issue 37 'done when': LLaMA-Factory's dpo_en_demo and kto_en_demo (their stand-ins) train at
    data.max_seq_len 512 with data.overlong skip and truncate; the run's setup counts what it did and
    its log says which records."""
    import json as json_
    from core.run.rundir import RunDir
    from core.train import main as train_main
    runs = tmp_path / "runs"
    code = train_main(["--config", str(ROOT / "configs" / "lora_demo.yaml"), f"run.runs_dir={runs}",
                       f"data.train_file={folder}", f"data.dataset=[{name}]", "data.validation_file=null",
                       "data.validation_fraction=0.2", "data.test_file=null", "data.max_seq_len=512",
                       f"data.overlong={policy}", f"train.objective={objective}", "train.max_steps=2",
                       "train.eval_every=2", "train.log_every=1", "train.micro_batch_size=2", "train.warmup_steps=1",
                       "eval.downstream=false", "eval.baseline=false", "early_stopping.enabled=false"])
    (run_path,) = [p for p in runs.iterdir() if not p.is_symlink()]
    run = RunDir(run_path)
    assert code == 0 and run.read_status().state == "finished", run.log_tail()
    records = [json_.loads(line) for line in run.metrics_path.read_text().splitlines()]
    setup = next(r for r in records if r.get("event") == "setup")
    train, val = setup["data"]["train"], setup["data"]["validation"]
    assert (train["pairs"], val["pairs"]) == used and (train["overlong_records"], val["overlong_records"]) == (11, 3)
    assert train["overlong_policy"] == policy and setup["seq_len"] <= 512
    done = "skipped" if policy == "skip" else "truncated"
    assert f"train: 11 of 32 records are longer than max_seq_len 512 tokens and were {done}" in run.log_path.read_text()
    evaluations = [r for r in records if r["kind"] == "eval"]
    assert evaluations and all(0.0 <= r["reward_accuracy"] <= 1.0 for r in evaluations)
