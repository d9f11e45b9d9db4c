import pytest

from asrscale.data.datadir import DataDir, read_data_dir, read_table


def test_round_trip_and_spk2utt(tmp_path):
    data = DataDir()
    data.add("b-2", "/x/b2.flac", "two words", "b", 1.25)
    data.add("a-1", "/x/a1.flac", "one", "a", 0.5)
    data.add("b-1", "/x/b1.flac", "three", "b", 2.0)
    data.write(tmp_path)
    assert read_data_dir(tmp_path) == data
    assert (tmp_path / "spk2utt").read_text() == "a a-1\nb b-1 b-2\n"
    with pytest.raises(ValueError, match="duplicate utterance id 'a-1'"):
        data.add("a-1", "/x", "t", "a", 1.0)


def test_errors_name_the_file_and_line(tmp_path):
    (tmp_path / "text").write_text("u1 hello\nu2 world\nu1 again\n")
    with pytest.raises(ValueError, match=r"text:3: duplicate key 'u1'"):
        read_table(tmp_path / "text")


def test_tables_that_disagree_are_named(tmp_path):
    data = DataDir()
    data.add("u1", "/x/1.flac", "one", "s", 1.0)
    data.write(tmp_path)
    (tmp_path / "text").write_text("u1 one\nu2 two\n")
    with pytest.raises(ValueError, match="text and .*wav.scp list different utterances"):
        read_data_dir(tmp_path)
