"""Reading runs right (issue 29 §4): the rank count from the command line and from size/count, rccl-tests'
JSON lines with a last line cut short, nccl-tests' per-iteration timing (-I) giving spikes and stragglers."""

import pytest

from ringlab.nccl import explain_texts, read_texts
from ringlab.nccl.launch import launch_of

from nccl_fixtures import FIXTURES, fixture_text

CONSTRUCTED = FIXTURES / "constructed"


def _without_devices(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if " Rank " not in line or " device " not in line)


@pytest.mark.parametrize("command, ranks", [
    # NVIDIA/nccl#1218 (32 H100 nodes): mpirun ... -np 32 -H <hosts> ... all_gather_perf ... -g 8 -t 1: 256 ranks
    ("/opt/openmpi/openmpi-4.1.5/bin/mpirun --show-progress -mca plm_rsh_force_rsh 1 --bind-to none -np 32 "
     "-H <hosts> -x NCCL_MIN_NCHANNELS=16 /nccl-tests/build/all_gather_perf -b 2G -e 2G -f 2 -g 8 -t 1 -c 0 -n 1", 256),
    # NVIDIA/nccl-tests#309: mpirun --np 32 -H spt01:8,... all_reduce_perf_mpi ... -g 1
    ("/mnt/nfs/openmpi-4.1.8/ompi_install/bin/mpirun --np 32 -H spt01:8,spt02:8,pt01:8,pt02:8 -x NCCL_DEBUG=VERSION "
     "/home/vmware/nccl-tests/build/all_reduce_perf_mpi -b 8 -e 16g -f 2 -g 1", 32),
    # FlagPerf's script: mpirun -np 8 all_reduce_perf -t 1 -g 1
    ("mpirun --allow-run-as-root -np 8 all_reduce_perf -t 1 -g 1 -b 2M -e 32M -d float -o sum", 8),
    # CSCS (tests/fixtures/nccl/cscs_gh200_2x4_*): srun -N2 -t5 ... --ntasks-per-node=4; srun's -t is its time limit
    ("$ srun -N2 -t5 --mpi=pmix --ntasks-per-node=4 --environment=nccl-test-ompi /nccl-tests-2.17.1/build/"
     "all_reduce_perf -b 8 -e 128M -f 2", 8),
    ("./build/all_gather_perf -b 8 -e 128M -f 2 -g 8", 8),  # one process, 8 GPUs (the V100 case of issue 29)
    ("NCCL_DEBUG=INFO ./all_reduce_perf --nthreads 2 --ngpus 4 -N 3", 8),  # nccl-tests' -N is run cycles
])
def test_ranks_from_the_command_line(command, ranks):
    assert launch_of(command).ranks == ranks


@pytest.mark.parametrize("command", ["mpirun -H a:8,b:8 ./all_reduce_perf -b 8", "srun -N 2 all_reduce_perf",
                                     "echo all_reduce_perf is not run here", "mpirun -np many ./all_reduce_perf"])
def test_commands_that_do_not_say_how_many(command):
    assert launch_of(command) is None


@pytest.mark.parametrize("name, ranks", [("a100_sxm4_8gpu_nccl_tests_2_19.txt", 8),
                                         ("cscs_gh200_2x4_cxi_hook_disabled.txt", 8)])
def test_real_runs_without_device_lines_keep_their_rank_count(name, ranks):
    """The device lines are the best source; without them the command line at the top of the paste gives the same."""
    text = fixture_text(name)
    assert explain_texts([(name, text)])[0].facts.world_size == ranks
    facts = explain_texts([(name, _without_devices(text))])[0].facts
    assert facts.world_size == ranks and any("command line" in n for n in facts.notes)


def test_all_gather_rank_count_from_size_and_count_not_from_busbw():
    """SkyPilot's 2 x 8 H200 all_gather without its device lines: size = count x 4 B x N gives N = 16, where the
    busbw/algbw ratio (rounded to two decimals at small sizes) could name any N."""
    name = "skypilot_gke_h200_2x8_all_gather_rdma.txt"
    facts = explain_texts([(name, _without_devices(fixture_text(name)))])[0].facts
    assert facts.collective == "all_gather" and facts.world_size == 16
    assert any("size / (count x type size)" in n for n in facts.notes)


def test_rccl_json_lines_with_a_cut_last_line():
    """ROCm/rccl-tests#93's sample: '#wrong' spelt with its hash, the sixth record cut mid-line."""
    doc = read_texts([("j", fixture_text("rccl_tests_93_allreduce_json_lines_cut.txt"))])
    (run,) = doc.runs
    assert [r.size for r in run.rows] == [1024, 2048, 4096]
    assert run.rows[0].out_of_place.wrong == 0 and run.rows[2].in_place is None
    assert len(run.truncated) == 1 and run.truncated[0].number == 6 and run.header["ranks"] == 4


def test_json_lines_broken_in_the_middle_are_not_json():
    good = fixture_text("rccl_tests_93_allreduce_json_lines_cut.txt").splitlines()
    text = "\n".join(good[:2] + ['{"#wrong":"0","alg'] + good[2:5])
    with pytest.raises(ValueError, match="not nccl-tests output"):
        read_texts([("j", text)])


def test_per_iteration_columns_give_spikes():
    text = (CONSTRUCTED / "per_iter_16B_allreduce_2node.txt").read_text()
    report = explain_texts([("i", text)])[0]
    half = report.run.rows[0].out_of_place
    assert (half.time_us, half.iter_max_us, half.iter_p99_us) == (16.32, 2666.0, 23.55)
    spike = next(f for f in report.findings if f.id == "iteration-spikes")
    assert f"{2832 / 16.42:.1f}x" in spike.message  # the worst half: in place, 2832 / 16.42
    assert "straggler" not in {f.id for f in report.findings}  # no per-process times in the text


def test_per_process_json_gives_the_straggler():
    report = explain_texts([("j", (CONSTRUCTED / "per_iter_json_straggler.json").read_text())])[0]
    ids = [f.id for f in report.findings]
    assert "straggler" in ids and "iteration-spikes" in ids
    slow = next(f for f in report.findings if f.id == "straggler")
    assert slow.message.startswith("process 1 is the slowest at 4 of 4 sizes")
    spike = next(f for f in report.findings if f.id == "iteration-spikes")
    assert "16,777,216 B" in spike.message


def test_healthy_runs_have_no_iteration_findings():
    for name in ("a100_sxm4_8gpu_nccl_tests_2_19.txt", "skypilot_gke_h200_2x8_all_gather_rdma.txt"):
        ids = {f.id for f in explain_texts([(name, fixture_text(name))])[0].findings}
        assert not ids & {"iteration-spikes", "straggler"}
