#!/usr/bin/env bash
# Train on the GPU server over SSH: send the repo, start a run under tmux (closing SSH never stops it), follow
# its log, see what runs, bring the run directory back. Settings come from .env (see .env.example).
# `scripts/remote.sh help` lists the commands and the settings. Exit codes: 0 done, 1 remote or SSH failure,
# 2 bad settings or usage (one line on stderr).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
ENV_FILE="${ENLACE_ENV_FILE:-$ROOT/.env}"
TMUX_SOCKET=enlace  # our own tmux server on the remote (tmux -L enlace): never the user's default one
KEYS=(ENLACE_REMOTE_HOST ENLACE_REMOTE_USER ENLACE_REMOTE_PORT ENLACE_REMOTE_KEY ENLACE_REMOTE_DIR
      ENLACE_REMOTE_KNOWN_HOSTS ENLACE_REMOTE_VENV)

usage() {
  cat <<'EOF'
usage: scripts/remote.sh COMMAND [ARGS]

commands:
  sync [--delete]                 send the repo to the server (rsync over SSH; never runs/ data/ .venv/ _docs/
                                  _proc/ .git/ .env); --delete also removes server files deleted here
  run [--name NAME] CONFIG_OR_NOTEBOOK [ARGS...]
                                  start a run in a tmux session on the server (it survives closing SSH):
                                    CONFIG.yaml    python -m enlace.train CONFIG [ARGS...] --out runs/NAME
                                                   (ARGS: overrides such as train.seed=99, --fresh)
                                    NOTEBOOK.ipynb papermill NOTEBOOK runs/NAME/report.ipynb [ARGS...] -p out runs/NAME
                                                   (ARGS: papermill's, e.g. -p hardware turing-2060)
                                  NAME defaults to the config's file name (for a notebook: that of its `-p run`
                                  config, else the notebook's). The server's venv is set up by scripts/_venv.sh.
  logs [NAME] [--no-follow]       print the run's log (runs/NAME/remote.log) and follow it until the run ends
  status                          runs on the server: running/done/failed, and the last metrics line of each
  fetch [NAME] [--with-checkpoints] [--to DIR]
                                  bring runs/NAME back to runs/remote/NAME (or DIR): reports, metrics, model
                                  files; checkpoints/ only with --with-checkpoints
  help                            this text
NAME defaults to the last run started with `run`.

settings (.env in the repo root, or the file named by ENLACE_ENV_FILE; environment variables win):
  ENLACE_REMOTE_HOST         server hostname or IP (required)
  ENLACE_REMOTE_USER         SSH user on the server (required)
  ENLACE_REMOTE_PORT         SSH port (default 22)
  ENLACE_REMOTE_KEY          private key file (default: ssh-agent and ~/.ssh defaults)
  ENLACE_REMOTE_DIR          repo copy on the server, absolute or ~/relative, e.g. ~/enlace (required)
  ENLACE_REMOTE_KNOWN_HOSTS  known_hosts file to use (default: ssh's own ~/.ssh/known_hosts)
  ENLACE_REMOTE_VENV         existing virtualenv on the server to use instead of the repo's .venv (default: none;
                             scripts/_venv.sh creates and maintains DIR/.venv)
EOF
}

die() { echo "remote: $*" >&2; exit 2; }   # bad settings or usage
fail() { echo "remote: $*" >&2; exit 1; }  # remote or SSH failure

# ---- settings ------------------------------------------------------------------------------------------------
load_env() {
  # Parse .env as KEY=VALUE lines (never sourced: it is data, not code). The environment overrides the file.
  local line n=0 key val k
  local re_dq='^"([^"]*)"[[:space:]]*(#.*)?$' re_sq="^'([^']*)'[[:space:]]*(#.*)?\$"
  if [ -f "$ENV_FILE" ]; then
    while IFS= read -r line || [ -n "$line" ]; do
      n=$((n + 1))
      line="${line%$'\r'}"
      [[ "$line" =~ ^[[:space:]]*(#.*)?$ ]] && continue
      [[ "$line" =~ ^[[:space:]]*(export[[:space:]]+)?([A-Za-z_][A-Za-z0-9_]*)[[:space:]]*=(.*)$ ]] \
        || die "$ENV_FILE:$n: not a KEY=VALUE line"
      key="${BASH_REMATCH[2]}"
      val="${BASH_REMATCH[3]}"
      val="${val#"${val%%[![:space:]]*}"}"; val="${val%"${val##*[![:space:]]}"}"  # trim
      if [[ "$val" =~ $re_dq || "$val" =~ $re_sq ]]; then val="${BASH_REMATCH[1]}"
      elif [[ "$val" == [\"\']* ]]; then die "$ENV_FILE:$n: $key: unmatched quote"
      else val="${val%%[[:space:]]#*}"; fi  # unquoted: an inline ' # comment' ends the value
      case "$key" in
        ENLACE_REMOTE_*)
          local ok=0
          for k in "${KEYS[@]}"; do [ "$k" = "$key" ] && ok=1; done
          [ "$ok" = 1 ] || die "$ENV_FILE:$n: unknown setting $key (known: ${KEYS[*]})" ;;
        *) continue ;;  # other tools' settings may live in the same .env
      esac
      printf -v "FILE_$key" '%s' "$val"
    done < "$ENV_FILE"
  fi
  for k in "${KEYS[@]}"; do
    local f="FILE_$k"
    if [ -z "${!k:-}" ] && [ -n "${!f:-}" ]; then printf -v "$k" '%s' "${!f}"; fi
  done
}

check_dir() {  # check_dir DIR: normalise ENLACE_REMOTE_DIR lexically into NDIR; refuse what sync must never own
  # `//` and `.` are dropped, `..` is refused (it can climb anywhere through a symlink). Refused: the home folder
  # itself, /, any top-level folder (/etc, /root, /data...), /home/USER and /Users/USER, and anything inside the
  # system folders. The server side also refuses a folder that physically is /, top-level, or the home or above it.
  local raw="$1" rest c out="" top
  local v="ENLACE_REMOTE_DIR='$raw'" fix="name a sub-folder of your own such as ~/enlace"
  case "$raw" in "~"*) rest="${raw#\~}/" ;; *) rest="$raw/" ;; esac
  while [ -n "$rest" ]; do
    c="${rest%%/*}"; rest="${rest#*/}"
    case "$c" in
      ""|.) ;;
      ..) die "$v: '..' is not supported (it can lead anywhere); $fix" ;;
      *) out+="/$c" ;;
    esac
  done
  if [[ "$raw" == "~"* ]]; then
    NDIR="~$out"
    [ -n "$out" ] || die "$v is too broad: it resolves to the home folder itself; $fix"
    return 0
  fi
  NDIR="${out:-/}"
  top="${out#/}"; top="/${top%%/*}"
  [ -n "$out" ] || die "$v is too broad: it resolves to the root folder /; $fix"
  [ "$top" != "$out" ] || die "$v is too broad: it resolves to the top-level folder $out; $fix"
  [[ ! "$out" =~ ^/(home|Users)/[^/]+$ ]] || die "$v is too broad: it resolves to the home folder $out; name a sub-folder such as $out/enlace"
  case "$top" in
    /bin|/boot|/dev|/etc|/lib|/lib32|/lib64|/libx32|/proc|/run|/sbin|/sys|/usr|/var)
      die "$v resolves to $out, inside the system folder $top; $fix" ;;
  esac
}

settings() {
  load_env
  if [ ! -f "$ENV_FILE" ] && [ -z "${ENLACE_REMOTE_HOST:-}" ]; then
    die "no settings: $ENV_FILE does not exist (cp .env.example .env and fill in ENLACE_REMOTE_HOST, _USER, _DIR)"
  fi
  HOST="${ENLACE_REMOTE_HOST:-}"; RUSER="${ENLACE_REMOTE_USER:-}"; PORT="${ENLACE_REMOTE_PORT:-22}"
  KEY="${ENLACE_REMOTE_KEY:-}"; RDIR="${ENLACE_REMOTE_DIR:-}"; KNOWN="${ENLACE_REMOTE_KNOWN_HOSTS:-}"
  VENV="${ENLACE_REMOTE_VENV:-}"
  local k
  for k in HOST USER DIR; do
    local v="ENLACE_REMOTE_$k"
    [ -n "${!v:-}" ] || die "ENLACE_REMOTE_$k is not set (in $ENV_FILE; see .env.example)"
  done
  [[ "$HOST" =~ ^[A-Za-z0-9_.:%-]+$ && "$HOST" != -* ]] || die "ENLACE_REMOTE_HOST='$HOST' is not a hostname or IP address"
  [[ "$RUSER" =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]*$ ]] || die "ENLACE_REMOTE_USER='$RUSER' is not a valid user name"
  [[ "$PORT" =~ ^[0-9]+$ ]] && [ "$PORT" -ge 1 ] && [ "$PORT" -le 65535 ] \
    || die "ENLACE_REMOTE_PORT='$PORT' is not a port number (1-65535)"
  if [ -n "$KEY" ]; then
    KEY="${KEY/#\~\//$HOME/}"
    [ -f "$KEY" ] || die "ENLACE_REMOTE_KEY: no such file: $KEY"
    [ -r "$KEY" ] || die "ENLACE_REMOTE_KEY: cannot read $KEY"
    [[ "$KEY" != *"'"* ]] || die "ENLACE_REMOTE_KEY: a path with a single quote is not supported: $KEY"
    if [ "$(ls -lLd -- "$KEY" | cut -c5-10)" != "------" ]; then  # what ssh checks: no group/other access
      die "ENLACE_REMOTE_KEY: $KEY is accessible by other users and ssh will refuse it; chmod 600 it"
    fi
  fi
  if [ -n "$KNOWN" ]; then
    KNOWN="${KNOWN/#\~\//$HOME/}"
    [[ "$KNOWN" != *"'"* ]] || die "ENLACE_REMOTE_KNOWN_HOSTS: a path with a single quote is not supported"
    [ -d "$(dirname "$KNOWN")" ] || die "ENLACE_REMOTE_KNOWN_HOSTS: no such folder: $(dirname "$KNOWN")"
  fi
  [[ "$RDIR" != *$'\n'* && "$RDIR" != *"'"* ]] || die "ENLACE_REMOTE_DIR: newlines and single quotes are not supported"
  [[ "$RDIR" == /* || "$RDIR" == "~" || "$RDIR" == "~/"* ]] || die "ENLACE_REMOTE_DIR='$RDIR' must be absolute or start with ~/"
  check_dir "$RDIR"
  RDIR="$NDIR"  # from here on the normalised spelling: ~/a//b/./ is ~/a/b
  [ -z "$VENV" ] || [[ "$VENV" == /* || "$VENV" == "~/"* ]] || die "ENLACE_REMOTE_VENV='$VENV' must be absolute or start with ~/"

  SSH=(ssh -o BatchMode=yes -o StrictHostKeyChecking=accept-new -o ConnectTimeout=15
       -o ServerAliveInterval=15 -o ServerAliveCountMax=4 -o LogLevel=ERROR -p "$PORT" -l "$RUSER")
  [ -z "$KEY" ] || SSH+=(-i "$KEY" -o IdentitiesOnly=yes)
  [ -z "$KNOWN" ] || SSH+=(-o "UserKnownHostsFile=$KNOWN")
  TARGET="$RUSER@$HOST"
  RSYNC_TARGET="$RUSER@$HOST"
  [[ "$HOST" != *:* ]] || RSYNC_TARGET="$RUSER@[$HOST]"  # an IPv6 address
}

# ---- ssh helpers ---------------------------------------------------------------------------------------------
# The server side is the bash program in agent(), sent on stdin; its arguments are single-quoted by shq, so that
# any POSIX login shell (dash too, which has no $'...') hands them on byte for byte: spaces, newlines, $ and `.
# ssh exits 255 for its own failures (connection, key, host key): those become one line; anything else is the
# agent's own message and exit code.
ERRF=""  # ssh's stderr; made once in main() so that $(remote ...) subshells share it
trap '[ -z "$ERRF" ] || rm -f "$ERRF"' EXIT
shq() {  # shq ARG...: each ARG in single quotes, an embedded ' as '\'' (POSIX sh; bash's %q may write $'..')
  local a q="'\\''"
  for a in "$@"; do printf "'%s' " "${a//\'/"$q"}"; done
}
remote() {  # remote [SSH_OPTION... --] AGENT_COMMAND ARGS...
  local opts=() rc=0
  while [ $# -gt 0 ] && [[ "$1" == -* ]] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
  [ "${1:-}" != "--" ] || shift
  "${SSH[@]}" ${opts[@]+"${opts[@]}"} -- "$HOST" "bash -s -- $(shq "$RDIR" "$@")" < <(agent) 2>"$ERRF" || rc=$?
  if [ "$rc" = 255 ]; then
    fail "ssh to $TARGET port $PORT failed: $(tail -n 1 "$ERRF" | tr -d '\r' | sed 's/^ssh: //')"
  fi
  cat "$ERRF" >&2
  : > "$ERRF"
  return "$rc"
}

rsync_ssh() {  # the ssh command line for rsync -e (rsync splits it on spaces and honours single quotes)
  local a out=""
  for a in "${SSH[@]}"; do out+="'$a' "; done
  printf '%s' "$out"
}

rsync_dir() {  # RDIR as rsync wants it: ~/x is relative to the remote home
  local d="${RDIR%/}"
  [[ "$d" == "~/"* ]] && d="${d#\~/}"
  printf '%s' "$d"
}

agent() {
  cat <<'AGENT'
set -uo pipefail
dir="$1"; shift
cmd="$1"; shift
case "$dir" in "~/"*) dir="$HOME/${dir#\~/}" ;; esac
err() { echo "remote: $*" >&2; exit 1; }
shq() { local q="'\\''"; printf "'%s'" "${1//\'/"$q"}"; }  # for tmux's shell, which may be dash
T() { tmux -L enlace "$@"; }
sess() { local s="enlace-$1"; s="${s//./_}"; echo "${s//:/_}"; }  # tmux turns '.' and ':' in names into '_'
latest() { [ -f "$dir/runs/.remote-last" ] && cat "$dir/runs/.remote-last"; }
job_or_latest() { local j="${1:-}"; [ -n "$j" ] || j="$(latest)" || true; [ -n "$j" ] || err "no run started yet in $dir"; echo "$j"; }
state() {  # running | done | failed (exit N) | stopped
  local j="$1" rd="$dir/runs/$1"
  if command -v tmux >/dev/null && T has-session -t "=$(sess "$j")" 2>/dev/null; then echo running
  elif [ -f "$rd/remote.exit" ]; then
    local rc; rc="$(cat "$rd/remote.exit")"
    if [ "$rc" = 0 ]; then echo done; else echo "failed (exit $rc)"; fi
  else echo stopped; fi
}
case "$cmd" in
  prepare)  # prepare DELETE: make the folder; --delete only into a folder that sync made
    if [ -d "$dir" ]; then  # what the folder physically is (symlinks, the home spelled out): never / or the home
      real="$(cd -P -- "$dir" && pwd -P)" || err "cannot enter $dir"
      home="$(cd -P -- "$HOME" 2>/dev/null && pwd -P)" || home=""
      fix="name a sub-folder such as ~/enlace"
      if [ "$real" = / ]; then err "ENLACE_REMOTE_DIR: $dir is the root folder / on the server; $fix"
      elif [ "$real" = "$home" ]; then err "ENLACE_REMOTE_DIR: $dir is the home folder $home on the server; $fix"
      elif [[ -n "$home" && "$home" == "$real"/* ]]; then err "ENLACE_REMOTE_DIR: $dir is $real, which holds the home folder $home on the server; $fix"
      elif [[ "$real" != /*/* ]]; then err "ENLACE_REMOTE_DIR: $dir is the top-level folder $real on the server; $fix"
      fi
    fi
    ours=1  # the marker goes only into a folder sync makes (new or empty): --delete must never trust a user's folder
    if [ -d "$dir" ] && [ -n "$(ls -A "$dir" 2>/dev/null)" ] && [ ! -f "$dir/.enlace-remote" ]; then ours=0; fi
    if [ "$1" = 1 ] && [ "$ours" = 0 ]; then
      err "$dir has files that scripts/remote.sh sync did not put there; refusing --delete"
    fi
    mkdir -p "$dir" || err "cannot create $dir"
    if [ "$ours" = 1 ]; then touch "$dir/.enlace-remote"; fi ;;
  run)  # run JOB KIND TARGET VENV ARGS...
    job="$1" kind="$2" target="$3" venv="$4"; shift 4
    cd "$dir" 2>/dev/null || err "$dir does not exist on the server; run scripts/remote.sh sync first"
    [ -f "$target" ] || err "$target does not exist in $dir; run scripts/remote.sh sync first"
    command -v tmux >/dev/null || err "tmux is not installed on the server"
    session="$(sess "$job")"
    if T has-session -t "=$session" 2>/dev/null; then
      err "run '$job' is still running (scripts/remote.sh logs $job); pass --name for another run"
    fi
    case "$venv" in "~/"*) venv="$HOME/${venv#\~/}" ;; esac
    if [ -n "$venv" ] && [ ! -x "$venv/bin/python" ]; then err "ENLACE_REMOTE_VENV: $venv/bin/python does not exist on the server"; fi
    rd="runs/$job"
    mkdir -p "$rd"
    rm -f "$rd/remote.exit" "$rd/remote.pid"
    if [ "$kind" = config ]; then run_cmd=(python -m enlace.train "$target" "$@" --out "$rd")
    else run_cmd=(papermill "$target" "$rd/report.ipynb" --log-output "$@" -p out "$rd"); fi
    {
      echo '#!/usr/bin/env bash'
      echo "# Written by scripts/remote.sh run; runs in tmux session $session (tmux -L enlace attach -t $session)."
      printf 'cd -- %q || exit 1\n' "$dir"
      printf 'rd=%q\nvenv=%q\n' "$rd" "$venv"
      printf 'cmd=(%s)\n' "$(printf '%q ' "${run_cmd[@]}")"
      cat <<'RUNNER'
exec >>"$rd/remote.log" 2>&1
echo $$ > "$rd/remote.pid"
trap 'rc=$?; echo "$rc" > "$rd/remote.exit"; echo "[remote] $(date "+%F %T") exit $rc"' EXIT
echo "[remote] $(date "+%F %T") start: ${cmd[*]}"
if [ -n "$venv" ]; then export PATH="$venv/bin:$PATH"; else source scripts/_venv.sh; fi
set +e
export PYTHONUNBUFFERED=1
"${cmd[@]}"
exit $?
RUNNER
    } > "$rd/remote-run.sh"
    T new-session -d -s "$session" -c "$dir" "bash $(shq "$dir/$rd/remote-run.sh")" \
      || err "tmux could not start the run"
    echo "$job" > runs/.remote-last
    echo "started '$job' on the server in tmux session $session (log: $dir/$rd/remote.log)" ;;
  logs)  # logs JOB FOLLOW
    job="$(job_or_latest "$1")" || exit 1
    log="$dir/runs/$job/remote.log"
    [ -f "$log" ] || err "no log for run '$job' ($log)"
    if [ "$2" = 1 ] && [ "$(state "$job")" = running ] && [ -f "$dir/runs/$job/remote.pid" ]; then
      exec tail -n 200 -F --pid="$(cat "$dir/runs/$job/remote.pid")" "$log"
    fi
    tail -n 200 "$log" ;;
  status)
    cd "$dir" 2>/dev/null || err "$dir does not exist on the server; run scripts/remote.sh sync first"
    if command -v tmux >/dev/null; then
      sessions="$(T list-sessions -F '#{session_name}' 2>/dev/null | grep '^enlace-' || true)"
    else sessions=""; echo "(tmux is not installed on the server)"; fi
    found=0
    for rd in runs/*/; do
      j="$(basename "$rd")"
      [ -f "$rd/remote-run.sh" ] || continue
      found=1
      last="$(tail -n 1 "$rd/metrics.jsonl" 2>/dev/null | cut -c1-200)"
      printf '%-24s %-16s %s\n' "$j" "$(state "$j")" "${last:-(no metrics yet)}"
    done
    [ "$found" = 1 ] || echo "no runs started by scripts/remote.sh in $dir"
    [ -z "$sessions" ] || echo "tmux sessions: $(echo "$sessions" | tr '\n' ' ')" ;;
  latest) job_or_latest "" ;;
  exists) [ -d "$dir/runs/$1" ] || err "no run '$1' in $dir/runs" ;;
  *) err "unknown agent command $cmd" ;;
esac
AGENT
}

# ---- commands ------------------------------------------------------------------------------------------------
cmd_sync() {
  local delete=0
  while [ $# -gt 0 ]; do
    case "$1" in --delete) delete=1 ;; *) die "sync: unknown argument '$1'" ;; esac; shift
  done
  remote prepare "$delete"
  local opts=(-a -s --exclude=/runs/ --exclude=/data/ --exclude=/.venv/ --exclude=/_docs/ --exclude=/_proc/
              --exclude=/.git/ --include=/.env.example --exclude='/.env*' --exclude=__pycache__/ --exclude=.ipynb_checkpoints/
              --exclude=.pytest_cache/ --exclude='*.egg-info/' --exclude=/.enlace-remote)
  [ "$delete" = 0 ] || opts+=(--delete)
  rsync "${opts[@]}" -e "$(rsync_ssh)" -- "$ROOT/" "$RSYNC_TARGET:$(rsync_dir)/" \
    || fail "rsync to $TARGET:$RDIR failed"
  echo "synced $ROOT -> $TARGET:$RDIR"
}

cmd_run() {
  local name="" target kind
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) [ $# -ge 2 ] || die "run: --name needs a value"; name="$2"; shift 2 ;;
      --name=*) name="${1#--name=}"; shift ;;
      *) break ;;
    esac
  done
  [ $# -ge 1 ] || die "run: which config or notebook? (scripts/remote.sh run configs/runs/smoke-cpu.yaml)"
  target="$1"; shift
  target="${target#./}"
  case "$target" in
    *.yaml|*.yml) kind=config ;;
    *.ipynb) kind=notebook ;;
    *) die "run: '$target' is neither a .yaml config nor a .ipynb notebook" ;;
  esac
  [ -f "$ROOT/$target" ] || die "run: no such file in the repo: $target (paths are relative to the repo root)"
  local args=("$@") i from_run=""
  for ((i = 0; i < $#; i++)); do
    case "${args[i]}" in
      --out|--out=*) die "run: --out is set by remote.sh (runs/NAME); use --name" ;;
      -p|--parameters)
        [ "$kind" = notebook ] || continue
        case "${args[i+1]:-}" in
          out) die "run: '-p out' is set by remote.sh (runs/NAME); use --name" ;;
          run) from_run="$(basename "${args[i+2]:-}")"; from_run="${from_run%.*}" ;;
        esac ;;
    esac
  done
  [ -n "$name" ] || name="$from_run"
  [ -n "$name" ] || name="$(basename "${target%.*}")"
  [[ "$name" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "run: run name '$name' may only use letters, digits, '.', '_', '-'"
  remote run "$name" "$kind" "$target" "$VENV" "$@"
  echo "follow it with: scripts/remote.sh logs $name"
}

cmd_logs() {
  local job="" follow=1
  while [ $# -gt 0 ]; do
    case "$1" in --no-follow) follow=0 ;; -*) die "logs: unknown option '$1'" ;; *) job="$1" ;; esac; shift
  done
  # no pty: a local Ctrl-C or a dropped connection ends ssh; the remote tail ends with the run (or at its next
  # line, on the broken pipe); the run itself is never touched
  remote logs "$job" "$follow"
}

cmd_status() { [ $# = 0 ] || die "status takes no arguments"; remote status; }

cmd_fetch() {
  local job="" ckpt=0 to=""
  while [ $# -gt 0 ]; do
    case "$1" in
      --with-checkpoints) ckpt=1 ;;
      --to) [ $# -ge 2 ] || die "fetch: --to needs a folder"; to="$2"; shift ;;
      --to=*) to="${1#--to=}" ;;
      -*) die "fetch: unknown option '$1'" ;;
      *) job="$1" ;;
    esac
    shift
  done
  if [ -z "$job" ]; then job="$(remote latest)" || exit 1; fi
  [[ "$job" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "fetch: bad run name '$job'"
  remote exists "$job" || exit 1
  to="${to:-runs/remote/$job}"
  mkdir -p -- "$to"
  local opts=(-a -s)
  [ "$ckpt" = 1 ] || opts+=(--exclude=/checkpoints/)
  rsync "${opts[@]}" -e "$(rsync_ssh)" -- "$RSYNC_TARGET:$(rsync_dir)/runs/$job/" "$to/" \
    || fail "rsync from $TARGET:$RDIR/runs/$job failed"
  echo "fetched run '$job' -> $to$([ "$ckpt" = 1 ] || echo ' (without checkpoints/; --with-checkpoints for them)')"
}

main() {
  local cmd="${1:-}"
  [ $# -eq 0 ] || shift
  case "$cmd" in
    help|-h|--help) usage; exit 0 ;;
    "") usage >&2; exit 2 ;;
    sync|run|logs|status|fetch) ;;
    *) die "unknown command '$cmd' (commands: sync run logs status fetch help)" ;;
  esac
  local tools=(ssh)
  case "$cmd" in sync|fetch) tools+=(rsync) ;; esac  # run, logs and status only talk over ssh
  for tool in "${tools[@]}"; do command -v "$tool" >/dev/null || die "$tool is not installed here"; done
  settings
  ERRF="$(mktemp)"
  "cmd_$cmd" "$@"
}

main "$@"
