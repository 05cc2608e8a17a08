"""scripts/remote.sh for real: an OpenSSH server on 127.0.0.1 (throwaway host and client keys, its own tmux
folder), a copy of the repo and a remote folder whose paths contain spaces, then sync -> run (smoke config, 20
steps) -> logs -> status -> fetch. The SSH client following the log is killed mid-run; the run must finish anyway.
The rest of the GPU path without a GPU: sync --data, prepare (the corpus script on texts already on the server) and
serve (a tiny model on 127.0.0.1 and a free port, with its token, stopped by serve --stop).
Also: bad or missing settings are one line and exit code 2; ENLACE_REMOTE_DIR can never be the home, / or a
system folder, however it is spelled; arguments survive a dash login shell on the server byte for byte."""
import contextlib
import getpass
import json
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from conftest import ROOT

SSHD = shutil.which("sshd") or next((p for p in ("/usr/sbin/sshd", "/usr/local/sbin/sshd") if os.access(p, os.X_OK)), None)
TOOLS = {"sshd": SSHD, **{t: shutil.which(t) for t in ("ssh", "ssh-keygen", "tmux", "rsync")}}
MISSING = [t for t, p in TOOLS.items() if not p]
needs_tools = pytest.mark.skipif(bool(MISSING), reason=f"not installed: {' '.join(MISSING)} "
                                 "(apt-get install openssh-server openssh-client tmux rsync)")
SMOKE = ["configs/runs/smoke-cpu.yaml", "train.max_steps=20", "train.eval_every=10", "train.ckpt_every=10",
         "train.warmup_steps=2", "train.decay_frac=0.5"]


def COPY_IGNORE(folder, names):
    "What a repo copy leaves out: top-level outputs and the venv; caches anywhere."
    top = {".venv", "runs", "data", "_docs", "_proc", ".git", ".env"} if Path(folder) == ROOT else set()
    return [n for n in names if n in top or n in ("__pycache__", ".pytest_cache", ".ipynb_checkpoints") or n.endswith(".egg-info")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def remote_sh(repo: Path, env_file: Path, *args, timeout=120, path=None):
    "Run the repo copy's scripts/remote.sh with settings from env_file only (and PATH=path if given)."
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENLACE_REMOTE_")}
    env["ENLACE_ENV_FILE"] = str(env_file)
    if path: env["PATH"] = path
    return subprocess.run(["bash", str(repo / "scripts/remote.sh"), *map(str, args)], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=timeout)


def write_env(path: Path, **kv) -> Path:
    path.write_text("# written by tests/test_remote.py\n" + "".join(f'ENLACE_REMOTE_{k}="{v}"\n' for k, v in kv.items()))
    return path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    "sshd on a free 127.0.0.1 port as the current user, key login only; tmux sockets in a folder of its own."
    if MISSING: pytest.skip(f"not installed: {' '.join(MISSING)}")
    if not Path("/run/sshd").is_dir():  # Debian's sshd refuses to start without its privilege separation folder
        if os.geteuid() != 0: pytest.skip("/run/sshd is missing and we are not root to create it")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    tmp = tmp_path_factory.mktemp("sshd")
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "enlace-test", "-f", str(tmp / name)], check=True)
    (tmp / "authorized_keys").write_text((tmp / "client_key.pub").read_text())
    (tmp / "tmux").mkdir()
    port, dash_port = free_port(), free_port()
    # on dash_port the login shell is, in effect, dash: it parses the command line that ssh sends
    (tmp / "sshd_config").write_text(f"""Port {port}
Port {dash_port}
ListenAddress 127.0.0.1
HostKey {tmp}/host_key
PidFile {tmp}/sshd.pid
AuthorizedKeysFile {tmp}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
AllowUsers {getpass.getuser()}
UsePAM no
StrictModes no
SetEnv TMUX_TMPDIR={tmp}/tmux
Match LocalPort {dash_port}
    ForceCommand exec dash -c "$SSH_ORIGINAL_COMMAND"
""")
    log = open(tmp / "sshd.log", "w")
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(tmp / "sshd_config")], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.time() + 15
    while True:
        if proc.poll() is not None: pytest.fail(f"sshd exited: {(tmp / 'sshd.log').read_text()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close(); break
        except OSError:
            if time.time() > deadline: proc.kill(); pytest.fail("sshd did not listen within 15 s")
            time.sleep(0.1)
    yield {"tmp": tmp, "port": port, "dash_port": dash_port, "key": tmp / "client_key", "known_hosts": tmp / "known_hosts"}
    # our tmux server (its own socket folder), then our sshd
    subprocess.run(["tmux", "-L", "enlace", "kill-server"], env={**os.environ, "TMUX_TMPDIR": str(tmp / "tmux")},
                   capture_output=True)
    proc.terminate()
    try: proc.wait(10)
    except subprocess.TimeoutExpired: proc.kill()
    log.close()


@pytest.fixture
def setup(server, tmp_path):
    "A repo copy under a path with a space, with files that must not be synced, and its .env."
    repo = tmp_path / "local repo"
    shutil.copytree(ROOT, repo, ignore=COPY_IGNORE)
    for f in ("runs/local-only.txt", "data/shard.bin", ".venv/marker", "_docs/index.html", "_proc/x.ipynb"):
        (repo / f).parent.mkdir(parents=True, exist_ok=True); (repo / f).write_text("local only\n")
    (repo / ".env").write_text("ANTHROPIC_API_KEY=do-not-send\n")
    rdir = tmp_path / "remote side" / "enlace"
    env = write_env(tmp_path / "test.env", HOST="127.0.0.1", USER=getpass.getuser(), PORT=server["port"],
                    KEY=server["key"], DIR=rdir, KNOWN_HOSTS=server["known_hosts"], VENV=sys.prefix)
    assert (Path(sys.prefix) / "bin/python").exists(), "tests run from a virtualenv (scripts/test.sh uses .venv)"
    return repo, env, rdir


def ok(r, what):
    assert r.returncode == 0, f"{what}: exit {r.returncode}\nstdout: {r.stdout[-2000:]}\nstderr: {r.stderr[-2000:]}"
    return r


def last_step(metrics: Path) -> int:
    return json.loads(metrics.read_text().strip().splitlines()[-1])["step"]


@needs_tools
def test_sync_run_logs_status_fetch_and_ssh_kill(setup, tmp_path):
    repo, env, rdir = setup
    ok(remote_sh(repo, env, "sync"), "sync")
    for f in ("pyproject.toml", "configs/runs/smoke-cpu.yaml", "nbs/train.ipynb", "scripts/_venv.sh", "enlace/__init__.py"):
        assert (rdir / f).is_file(), f"sync did not send {f}"
    for f in ("runs", "data", ".venv", "_docs", "_proc", ".env"):
        assert not (rdir / f).exists(), f"sync sent {f}"

    # `run` over SSH; its SSH client is killed hard as soon as the run is up (if it has not returned by then)
    env_vars = {k: v for k, v in os.environ.items() if not k.startswith("ENLACE_REMOTE_")} | {"ENLACE_ENV_FILE": str(env)}
    script = ["bash", str(repo / "scripts/remote.sh")]
    rd = rdir / "runs/smoke-cpu"
    starter = subprocess.Popen([*script, "run", *SMOKE], cwd=repo, env=env_vars, text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.time() + 30
    while not (rd / "remote.pid").exists():
        assert time.time() < deadline and starter.poll() in (None, 0), f"run did not start: {starter.communicate()}"
        time.sleep(0.05)
    try: os.killpg(starter.pid, signal.SIGKILL)
    except ProcessLookupError: pass
    out, err = starter.communicate(timeout=10)
    assert starter.returncode in (0, -signal.SIGKILL), (starter.returncode, out, err)
    assert starter.returncode != 0 or "started 'smoke-cpu'" in out, out
    again = remote_sh(repo, env, "run", *SMOKE)
    assert again.returncode == 1 and "still running" in again.stderr, (again.returncode, again.stderr)

    # the run lives under the tmux server, not under any SSH session
    runner = int((rd / "remote.pid").read_text())
    chain, pid = [], runner
    while pid > 1:
        chain.append(Path(f"/proc/{pid}/comm").read_text().strip())
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    assert any(c.startswith("tmux") for c in chain) and "sshd" not in chain, f"run's process ancestry: {chain}"

    # follow the log over SSH, then kill that SSH client (and its wrapper) hard while the run is going
    follower = subprocess.Popen([*script, "logs"], cwd=repo, env=env_vars, text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    lines = []
    def read():
        for line in follower.stdout: lines.append(line)
    threading.Thread(target=read, daemon=True).start()
    deadline = time.time() + 30
    while not any("[remote]" in l and "start" in l for l in lines):
        assert follower.poll() is None and time.time() < deadline, f"logs did not show the run starting: {lines}"
        time.sleep(0.1)
    ssh_pids = subprocess.run(["pgrep", "-g", str(follower.pid), "-x", "ssh"], capture_output=True, text=True).stdout.split()
    assert ssh_pids, "no ssh client under `remote.sh logs`"
    os.killpg(follower.pid, signal.SIGKILL)
    follower.wait(10)
    assert not (rd / "remote.exit").exists(), "the run ended before the SSH clients were killed: nothing was tested"
    os.kill(runner, 0)  # still alive right after the kills

    deadline = time.time() + 180
    while not (rd / "remote.exit").exists():
        assert time.time() < deadline, f"the run did not finish: {(rd / 'remote.log').read_text()[-2000:]}"
        time.sleep(0.5)
    assert (rd / "remote.exit").read_text().strip() == "0", (rd / "remote.log").read_text()[-3000:]
    assert last_step(rd / "metrics.jsonl") == 20

    st = ok(remote_sh(repo, env, "status"), "status").stdout
    assert "smoke-cpu" in st and "done" in st and '"step": 20' in st, st
    lg = ok(remote_sh(repo, env, "logs", "smoke-cpu"), "logs of a finished run").stdout  # returns: nothing to follow
    assert "step 20: val_loss" in lg and "exit 0" in lg, lg

    ok(remote_sh(repo, env, "fetch"), "fetch")
    got = repo / "runs/remote/smoke-cpu"
    assert last_step(got / "metrics.jsonl") == 20 and (got / "config.yaml").is_file() and (got / "remote.log").is_file()
    assert not (got / "checkpoints").exists() and any((rd / "checkpoints").iterdir())
    dest = tmp_path / "with checkpoints"
    ok(remote_sh(repo, env, "fetch", "smoke-cpu", "--with-checkpoints", "--to", dest), "fetch --with-checkpoints")
    assert sorted(p.name for p in (dest / "checkpoints").iterdir()) == sorted(p.name for p in (rd / "checkpoints").iterdir())


@needs_tools
def test_unreachable_server_is_one_line(server, tmp_path):
    env = write_env(tmp_path / "x.env", HOST="127.0.0.1", USER=getpass.getuser(), PORT=free_port(), KEY=server["key"],
                    DIR=tmp_path / "r", KNOWN_HOSTS=server["known_hosts"])
    r = remote_sh(ROOT, env, "status")
    assert r.returncode == 1 and r.stdout == "", (r.returncode, r.stdout, r.stderr)
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("remote: ssh to ") and "refused" in r.stderr, r.stderr


@pytest.mark.skipif(not (shutil.which("ssh") and shutil.which("rsync")), reason="ssh or rsync not installed")
def test_help_and_bad_settings(tmp_path):
    h = remote_sh(ROOT, tmp_path / "none.env", "help")
    assert h.returncode == 0
    for word in ("sync", "--data", "prepare", "run", "logs", "status", "fetch", "serve", "--stop", "docs/remoto.md",
                 "ENLACE_REMOTE_HOST", "ENLACE_REMOTE_USER",
                 "ENLACE_REMOTE_PORT", "ENLACE_REMOTE_KEY", "ENLACE_REMOTE_DIR"):
        assert word in h.stdout, word
    example = (ROOT / ".env.example").read_text()
    for key in ("HOST", "USER", "PORT", "KEY", "DIR", "KNOWN_HOSTS", "VENV"):
        assert f"ENLACE_REMOTE_{key}=" in example, f".env.example lacks ENLACE_REMOTE_{key}"

    key = tmp_path / "id_test"; key.write_text("not a key\n"); key.chmod(0o600)
    open_key = tmp_path / "id_open"; open_key.write_text("x\n"); open_key.chmod(0o644)
    good = dict(HOST="gpu.example.org", USER="enlace", PORT="2222", KEY=key, DIR="~/enlace")
    cases = [
        (None, "does not exist"),
        ({k: v for k, v in good.items() if k != "HOST"}, "ENLACE_REMOTE_HOST is not set"),
        ({k: v for k, v in good.items() if k != "DIR"}, "ENLACE_REMOTE_DIR is not set"),
        (good | {"PORT": "22x"}, "ENLACE_REMOTE_PORT='22x' is not a port"),
        (good | {"PORT": "70000"}, "ENLACE_REMOTE_PORT"),
        (good | {"HOST": "-oProxyCommand=sh"}, "ENLACE_REMOTE_HOST"),
        (good | {"USER": "a b"}, "ENLACE_REMOTE_USER"),
        (good | {"KEY": tmp_path / "missing key"}, "no such file"),
        (good | {"KEY": open_key}, "chmod 600"),
        (good | {"DIR": "enlace"}, "must be absolute"),
        (good | {"DIR": "/"}, "too broad"),
        (good | {"DIR": "~/"}, "too broad"),
        (good | {"DIR": "~"}, "ENLACE_REMOTE_DIR"),
        (good | {"HSOT": "x"}, "unknown setting ENLACE_REMOTE_HSOT"),
    ]
    for i, (vals, expect) in enumerate(cases):
        f = tmp_path / f"case{i}.env"
        if vals is not None: write_env(f, **vals)
        r = remote_sh(ROOT, f, "status")
        assert r.returncode == 2 and r.stdout == "", (vals, r.returncode, r.stdout, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("remote: ") and expect in r.stderr, (vals, r.stderr)
    good_env = write_env(tmp_path / "good.env", **good)
    bad_line = tmp_path / "bad.env"; bad_line.write_text("ENLACE_REMOTE_HOST=h\njust words\n")
    r = remote_sh(ROOT, bad_line, "status")
    assert r.returncode == 2 and r.stderr.strip().endswith("bad.env:2: not a KEY=VALUE line"), r.stderr
    for args, expect in [(("bogus",), "unknown command"), (("run",), "which config"), (("run", "README.md"), "neither"),
                         (("sync", "--data", "runs/x"), "not under data/"), (("sync", "--data", "data/../etc"), "'..'"),
                         (("sync", "--data", "data/no-such-folder"), "no such file or folder"),
                         (("prepare", "--name", "a b"), "may only use"), (("serve",), "which model"),
                         (("serve", "--port", "http", "m"), "not a port"),
                         (("serve", "--host", "x;y", "m"), "not an IP"),
                         (("serve", "m", "--port", "9000"), "put --host, --port, --state before the model"),
                         (("serve", "m", "--token-file=t"), "set by remote.sh"), (("serve", "--stop", "m"), "no model"),
                         (("serve", "--bogus", "m"), "unknown option")]:
        r = remote_sh(ROOT, good_env, *args)
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and expect in r.stderr, (args, r.stderr)


@needs_tools
def test_status_needs_no_rsync(server, tmp_path):
    "Only sync and fetch copy files: status, logs and run work from a machine without rsync."
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in os.environ["PATH"].split(os.pathsep):
        for tool in Path(d).glob("*") if Path(d).is_dir() else []:
            if tool.name != "rsync" and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
    env = write_env(tmp_path / "x.env", HOST="127.0.0.1", USER=getpass.getuser(), PORT=free_port(), KEY=server["key"],
                    DIR=tmp_path / "r", KNOWN_HOSTS=server["known_hosts"])
    r = subprocess.run(["bash", str(ROOT / "scripts/remote.sh"), "status"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PATH": str(bin_dir), "ENLACE_ENV_FILE": str(env)})
    assert "rsync is not installed" not in r.stderr and r.stderr.startswith("remote: ssh to "), r.stderr
    r = subprocess.run(["bash", str(ROOT / "scripts/remote.sh"), "sync"], cwd=ROOT, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "PATH": str(bin_dir), "ENLACE_ENV_FILE": str(env)})
    assert r.returncode != 0 and "rsync is not installed here" in r.stderr, r.stderr


HOME = pwd.getpwuid(os.getuid()).pw_dir  # the SSH user's home on the test server (this machine)
MARKER = ".enlace-remote"  # what `sync` leaves in a folder it owns; `sync --delete` trusts it


def shims(folder: Path, log: Path) -> str:
    "PATH with an ssh that logs its call and runs the real one, and an rsync that only logs (nothing is ever copied)."
    bin_dir = folder / "shims"
    bin_dir.mkdir(parents=True)
    (bin_dir / "ssh").write_text(f'#!/bin/sh\necho ssh >> "{log}"\nexec "{TOOLS["ssh"]}" "$@"\n')
    (bin_dir / "rsync").write_text(f'#!/bin/sh\necho rsync >> "{log}"\n')
    for f in bin_dir.iterdir(): f.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


@contextlib.contextmanager
def no_leftovers(spelled: str):
    "Should the script regress, undo what its `prepare` did on the way: new markers, new (empty) folders."
    full = HOME + spelled[1:] if spelled.startswith("~") else spelled
    parts = full.split("/")
    folders = sorted({os.path.realpath("/".join(parts[:i]) or "/") for i in range(1, len(parts) + 1)}, key=len)
    existed = {f for f in folders if os.path.isdir(f)}
    marked = {f for f in folders if os.path.exists(os.path.join(f, MARKER))}
    try: yield
    finally:
        for f in reversed(folders):
            if f not in marked and os.path.isfile(os.path.join(f, MARKER)): os.remove(os.path.join(f, MARKER))
            if f not in existed and os.path.isdir(f):
                with contextlib.suppress(OSError): os.rmdir(f)


BROAD_DIRS = [  # (ENLACE_REMOTE_DIR, what the one-line refusal says)
    *[(d, "resolves to the home folder itself; name a sub-folder") for d in ("~", "~/", "~/.", "~//", "~/./", "~/.//./")],
    *[(d, "'..' is not supported") for d in ("~/foo/..", "~/enlace/../..", "/tmp/..")],
    *[(d, "resolves to the root folder /;") for d in ("/", "//", "/.", "/./", "///.//")],
    *[(d, "resolves to the top-level folder /etc;") for d in ("/etc", "/etc/", "//etc", "/./etc", "/etc/.", "/etc//")],
    *[(d, f"resolves to the top-level folder /{d.strip('/')};") for d in ("/home/", "/usr", "/var", "/tmp", "/srv", "/data")],
    *[(d, "resolves to the home folder /home/enlace-nobody; name a sub-folder such as /home/enlace-nobody/enlace")
      for d in ("/home/enlace-nobody", "/home//enlace-nobody/.", "//home/./enlace-nobody/")],
    ("/Users/enlace-nobody/", "resolves to the home folder /Users/enlace-nobody;"),
    *[(d, f"inside the system folder {d[:4]};") for d in ("/usr/local", "/usr//local/", "/etc/ssh", "/var/lib", "/var/log/x")],
    *[(HOME + tail, HOME) for tail in ("", "/", "/.", "//")],  # the SSH user's home, spelled out
]


@needs_tools
@pytest.mark.parametrize("rdir,expect", BROAD_DIRS, ids=[d for d, _ in BROAD_DIRS])
def test_broad_remote_dir_is_refused_before_anything_happens(server, tmp_path, rdir, expect):
    "Issue 19, case 4: home, / and system folders are refused in every spelling; no marker, no rsync, no SSH."
    log = tmp_path / "calls.log"
    log.touch()
    env = write_env(tmp_path / "broad.env", HOST="127.0.0.1", USER=getpass.getuser(), PORT=server["port"],
                    KEY=server["key"], DIR=rdir, KNOWN_HOSTS=server["known_hosts"])
    where = os.path.realpath(HOME + rdir[1:] if rdir.startswith("~") else rdir)  # the folder it names on the server
    had_marker = os.path.exists(os.path.join(where, MARKER))
    for args in (("sync",), ("sync", "--delete")):
        with no_leftovers(rdir):
            r = remote_sh(ROOT, env, *args, path=shims(tmp_path / args[-1], log))
            marked = not had_marker and os.path.exists(os.path.join(where, MARKER))
        assert r.returncode != 0 and r.stdout == "", (args, r.returncode, r.stdout, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("remote: ENLACE_REMOTE_DIR") and expect in r.stderr, (args, r.stderr)
        calls = log.read_text().split()
        assert "rsync" not in calls, f"{args}: rsync ran for ENLACE_REMOTE_DIR={rdir}"
        if not rdir.startswith(HOME):  # the home spelled out may only be known as such on the server (exit 1)
            assert r.returncode == 2 and f"ENLACE_REMOTE_DIR='{rdir}'" in r.stderr and calls == [], (args, r.returncode, calls, r.stderr)
        assert not marked, f"{args}: a marker was written in {where}"



@needs_tools
@pytest.mark.parametrize("target,expect", [(HOME, f"is the home folder {HOME} on the server"),
                                           ("/", "is the root folder / on the server"),
                                           ("/etc", "is the top-level folder /etc on the server")], ids=["home", "root", "etc"])
def test_remote_dir_through_a_symlink_is_refused_on_the_server(server, tmp_path, target, expect):
    "Issue 19, case 4: what the folder physically is counts too (a symlink, the home under another name)."
    link = tmp_path / "remote side" / "enlace"
    link.parent.mkdir()
    link.symlink_to(target)
    log = tmp_path / "calls.log"
    log.touch()
    env = write_env(tmp_path / "link.env", HOST="127.0.0.1", USER=getpass.getuser(), PORT=server["port"],
                    KEY=server["key"], DIR=link, KNOWN_HOSTS=server["known_hosts"])
    had_marker = os.path.exists(os.path.join(target, MARKER))
    for args in (("sync",), ("sync", "--delete")):
        with no_leftovers(target):
            r = remote_sh(ROOT, env, *args, path=shims(tmp_path / args[-1], log))
            marked = not had_marker and os.path.exists(os.path.join(target, MARKER))
        assert r.returncode == 1 and r.stdout == "", (args, r.returncode, r.stdout, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith("remote: ENLACE_REMOTE_DIR: ") and expect in r.stderr, (args, r.stderr)
        assert "rsync" not in log.read_text().split(), f"{args}: rsync ran into {target}"
        assert not marked, f"{args}: a marker was written in {target}"


@needs_tools
def test_a_plain_sync_into_a_users_folder_never_arms_delete(server, tmp_path):
    "Issue 19, case 4: sync into a non-empty folder it did not make leaves no marker, so --delete stays refused."
    rdir = tmp_path / "remote side" / "projects"
    rdir.mkdir(parents=True)
    (rdir / "thesis.tex").write_text("years of work\n")
    env = write_env(tmp_path / "p.env", HOST="127.0.0.1", USER=getpass.getuser(), PORT=server["port"],
                    KEY=server["key"], DIR=rdir, KNOWN_HOSTS=server["known_hosts"], VENV=sys.prefix)
    ok(remote_sh(ROOT, env, "sync"), "sync into a user's folder")
    assert not (rdir / MARKER).exists()
    r = remote_sh(ROOT, env, "sync", "--delete")
    assert r.returncode != 0 and "did not put there; refusing --delete" in r.stderr, r.stderr
    assert (rdir / "thesis.tex").read_text() == "years of work\n"


@needs_tools
@pytest.mark.skipif(not shutil.which("dash"), reason="dash not installed")
def test_arguments_survive_a_dash_login_shell(server, tmp_path):
    "Issue 19, case 11c: the server's login shell is dash (no $'...'); run's ARGS reach the run byte for byte."
    rdir = tmp_path / "remote side" / "enlace"  # no sync needed: the config is put there by hand
    (rdir / "configs/runs").mkdir(parents=True)
    shutil.copy(ROOT / "configs/runs/smoke-cpu.yaml", rdir / "configs/runs")
    venv = tmp_path / "fake venv"  # its python records its arguments instead of training
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").write_text(f"#!{sys.executable}\nimport json, sys\njson.dump(sys.argv[1:], open('argv.json', 'w'))\n")
    (venv / "bin/python").chmod(0o755)
    env = write_env(tmp_path / "dash.env", HOST="127.0.0.1", USER=getpass.getuser(), PORT=server["dash_port"],
                    KEY=server["key"], DIR=rdir, KNOWN_HOSTS=server["known_hosts"], VENV=venv)
    pwned = tmp_path / "pwned"
    args = [f"two words\nsecond line, it's $(touch {pwned}1) `touch {pwned}2` $HOME \\ 'quoted' \"dq\" end",
            "", "it's", "ends with a newline\n", "\n", "train.seed=7", "*"]
    r = ok(remote_sh(ROOT, env, "run", "--name", "dash-args", "configs/runs/smoke-cpu.yaml", *args), "run over dash")
    assert "started 'dash-args'" in r.stdout, r.stdout
    done = rdir / "runs/dash-args/remote.exit"
    deadline = time.time() + 30
    while not done.exists():
        assert time.time() < deadline, (rdir / "runs/dash-args/remote.log").read_text()[-2000:]
        time.sleep(0.1)
    assert done.read_text().strip() == "0", (rdir / "runs/dash-args/remote.log").read_text()[-2000:]
    got = json.loads((rdir / "argv.json").read_text())
    assert got == ["-m", "enlace.train", "configs/runs/smoke-cpu.yaml", *args, "--out", "runs/dash-args"], got
    assert not list(tmp_path.glob("pwned*")), "an argument was run as a command"


def wait_for(path: Path, log: Path, timeout=120):
    deadline = time.time() + timeout
    while not path.exists():
        assert time.time() < deadline, log.read_text()[-3000:] if log.exists() else f"no {log}"
        time.sleep(0.2)


@needs_tools
def test_sync_data_and_prepare_on_the_server(setup, tmp_path):
    "sync --data sends one folder of data/ (links as files, nothing else of data/); prepare runs the corpus script."
    repo, env, rdir = setup
    shards = repo / "data/shards/tiny"
    shards.mkdir(parents=True)
    (shards / "train-000.bin").write_bytes(b"\x01\x02" * 100)
    (tmp_path / "elsewhere.json").write_text('{"linked": true}\n')
    (shards / "manifest.json").symlink_to(tmp_path / "elsewhere.json")
    r = ok(remote_sh(repo, env, "sync", "--data", "./data/shards/tiny/"), "sync --data")
    assert "synced data/shards/tiny" in r.stdout, r.stdout
    sent = rdir / "data/shards/tiny"
    assert (sent / "train-000.bin").read_bytes() == b"\x01\x02" * 100
    assert not (sent / "manifest.json").is_symlink()
    assert json.loads((sent / "manifest.json").read_text()) == {"linked": True}
    assert sorted(p.name for p in (rdir / "data").iterdir()) == ["shards"], "sync --data sent more than its folder"
    assert (rdir / "pyproject.toml").is_file() and not (rdir / "runs").exists()

    # the corpus script on the server, under tmux, on texts that are only there (the server's own folder)
    texts = tmp_path / "server texts"
    words = "el niño la señora don Ramón la huerta Madrid la aldea el río comió miró dijo volvió mañana".split()
    names = ("novela/Galdos_Tristana.txt", "novela/Bazan.txt", "cuentos/Clarin.txt", "cuentos/Pardo.txt", "Miro.txt")
    for seed, name in enumerate(names):
        rng = random.Random(seed)
        (texts / name).parent.mkdir(parents=True, exist_ok=True)
        (texts / name).write_text("\n\n".join(" ".join(rng.choice(words) for _ in range(40)) + "." for _ in range(40)),
                                  encoding="utf-8")
    prep = ("--no-progress", "--val-per-mille", 300)
    r = ok(remote_sh(repo, env, "prepare", "--from", texts, "--vocab", 300, "--", *prep), "prepare")
    assert "started 'prepare-data'" in r.stdout and "scripts/remote.sh logs prepare-data" in r.stdout, r.stdout
    rd = rdir / "runs/prepare-data"
    wait_for(rd / "remote.exit", rd / "remote.log")
    log = (rd / "remote.log").read_text()
    assert (rd / "remote.exit").read_text().strip() == "0", log[-3000:]
    out = rdir / "data/shards/es"  # what configs/data/corpus.yaml reads
    assert (out / "manifest.json").is_file() and (out / "tokenizer/tokenizer.json").is_file(), log[-3000:]
    assert [p.name for p in (rdir / "data/heldout").iterdir()] == ["novela__Galdos_Tristana.txt"]
    assert len(list((rdir / "data/raw/es").iterdir())) == 4
    assert "creating .venv" not in log and not (rdir / ".venv").exists(), "prepare made a venv of its own"
    lg = ok(remote_sh(repo, env, "logs", "--no-follow"), "logs of the prepare").stdout  # the last job started
    assert "[data] shards:" in lg and "exit 0" in lg, lg
    st = ok(remote_sh(repo, env, "status"), "status").stdout
    assert "prepare-data" in st and "done" in st, st

    # the shards step alone, on any source of enlace.prepare
    r = ok(remote_sh(repo, env, "prepare", "--name", "shards-only", "enlace.prepare", texts, "--out",
                     "data/shards/cuentos", "--train-tokenizer", 300, *prep), "prepare enlace.prepare")
    rd = rdir / "runs/shards-only"
    wait_for(rd / "remote.exit", rd / "remote.log")
    assert (rd / "remote.exit").read_text().strip() == "0", (rd / "remote.log").read_text()[-3000:]
    assert "start: python -m enlace.prepare" in (rd / "remote.log").read_text()
    assert (rdir / "data/shards/cuentos/manifest.json").is_file()


def tiny_run(folder: Path) -> Path:
    "A finished run folder holding a small random model with the chat specials (what enlace.serve needs)."
    import torch
    from enlace.checkpoint import export_model
    from enlace.config import load_layer
    from enlace.model import Transformer
    from enlace.tokenizer import Tokenizer
    torch.manual_seed(0)
    cfg = load_layer(ROOT / "configs/model/smoke.yaml", "model")
    path = export_model(Transformer(cfg), folder, Tokenizer.bytes())
    (folder / "summary.json").write_text(json.dumps({"model_file": path.name}))
    return path


@needs_tools
def test_serve_a_run_to_the_network_and_stop_it(setup):
    "serve: a run on the server behind its token, in tmux (not under SSH); status, logs, a second serve, --stop."
    from conftest import get
    repo, env, rdir = setup
    ok(remote_sh(repo, env, "sync"), "sync")
    tiny_run(rdir / "runs/tiny-sft")
    port = free_port()
    r = remote_sh(repo, env, "serve", "--host", "127.0.0.1", "--port", port, "tiny-sft", "--person", "Ana", timeout=300)
    ok(r, "serve")
    url = f"http://127.0.0.1:{port}"
    token = (rdir / "serve/token").read_text().strip()
    assert len(token) == 48 and (rdir / "serve/token").stat().st_mode & 0o077 == 0
    try:
        assert f"ENLACE at {url}/" in r.stdout and f"token: {token}" in r.stdout, r.stdout
        assert f"open {url}/ on the home network" in r.stdout and "serve --stop" in r.stdout, r.stdout
        assert get(url + "/health", token)[0] == 200
        assert get(url + "/v1/models")[0] == 401  # the token guards everything but the page
        with urllib.request.urlopen(url + "/", timeout=10) as page:
            assert page.status == 200 and "clave de la casa" in page.read().decode()  # the sign-in form

        # it lives under the tmux server, not under the SSH session that started it
        pid = int((rdir / "serve/home/remote.pid").read_text())
        chain = []
        while pid > 1:
            chain.append(Path(f"/proc/{pid}/comm").read_text().strip())
            pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert any(c.startswith("tmux") for c in chain) and "sshd" not in chain, chain

        again = remote_sh(repo, env, "serve", "--host", "127.0.0.1", "--port", free_port(), "tiny-sft")
        assert again.returncode == 1 and "service 'home' is already running" in again.stderr, again.stderr
        st = ok(remote_sh(repo, env, "status"), "status").stdout
        assert "service home" in st and "running" in st and f"ENLACE at {url}/" in st, st
        lg = ok(remote_sh(repo, env, "logs", "--serve", "--no-follow"), "logs --serve").stdout
        assert f"ENLACE at {url}/" in lg and "Ana" in lg.splitlines()[-1], lg

        # a later sync --delete never touches the family's state or the token on the server
        ok(remote_sh(repo, env, "sync", "--delete"), "sync --delete")
        assert (rdir / "serve/token").read_text().strip() == token and (rdir / "state").is_dir()
    finally:
        stop = remote_sh(repo, env, "serve", "--stop")
    ok(stop, "serve --stop")
    assert "stopped service 'home'" in stop.stdout, stop.stdout
    assert (rdir / "serve/home/remote.exit").read_text().strip() == "0", (rdir / "serve/home/remote.log").read_text()
    with pytest.raises(OSError):
        urllib.request.urlopen(url + "/health", timeout=5)
    r = remote_sh(repo, env, "serve", "--stop")
    assert r.returncode == 1 and "no service 'home' is running" in r.stderr, r.stderr


@needs_tools
def test_serve_refusals_are_one_line(setup):
    "A model that is not there, and a service that cannot start (its port taken): one line, exit 1, nothing running."
    repo, env, rdir = setup
    ok(remote_sh(repo, env, "sync"), "sync")
    r = remote_sh(repo, env, "serve", "--host", "127.0.0.1", "--port", free_port(), "no-such-run")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "no run 'no-such-run'" in r.stderr, r.stderr
    tiny_run(rdir / "runs/tiny-sft")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        r = remote_sh(repo, env, "serve", "--name", "taken", "--host", "127.0.0.1", "--port", port, "runs/tiny-sft",
                      timeout=300)
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1, (r.returncode, r.stderr)
    assert "the service did not start: error: cannot listen on 127.0.0.1" in r.stderr, r.stderr
    st = ok(remote_sh(repo, env, "status"), "status").stdout
    assert "service taken" in st and "failed (exit 2)" in st, st
