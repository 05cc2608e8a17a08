#!/usr/bin/env bash
# Train and serve on the GPU server over SSH: send the repo (and, on request, data), prepare the corpus there, start
# a run under tmux (closing SSH never stops it), follow its log, see what runs, bring the run directory back, serve
# a finished model to the home network. Settings come from .env (see .env.example); docs/remoto.md walks the path.
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
uso: scripts/remote.sh ORDEN [ARGUMENTOS]

Entrenar y servir en el servidor con GPU por SSH. El camino completo, paso a paso: docs/remoto.md.

órdenes:
  sync [--delete] [--data RUTA]...
        envía el repositorio al servidor (rsync por SSH; nunca runs/ data/ state/ serve/ .venv/ _docs/ _proc/
        .git/ .env); --delete borra también en el servidor lo que se borró aquí; --data RUTA envía además una
        carpeta o archivo de data/ (p. ej. --data data/shards/es, shards ya preparados aquí) al mismo sitio del
        servidor, siguiendo los enlaces simbólicos (se repite para varias)
  prepare [--name NOMBRE] [ARGS...]
        prepara el corpus en el servidor, en una sesión de tmux: scripts/prepare_smoke_data.sh ARGS. Sin ARGS
        descarga los libros de Project Gutenberg de configs/data/gutenberg-es.tsv (--pin mientras la lista no
        fije su sha256) y escribe data/shards/es con un tokenizador de 16384 palabras, lo que leen
        configs/runs/pretrain-2060.yaml y pretrain-5090.yaml; --from CARPETA toma los .txt de una carpeta del
        servidor (ver scripts/prepare_smoke_data.sh --help). NOMBRE: prepare-data por defecto; se sigue con
        logs NOMBRE.
  prepare [--name NOMBRE] enlace.prepare FUENTES... --out data/shards/es --train-tokenizer 16384 [ARGS...]
        solo el paso de los shards, con cualquier fuente de python -m enlace.prepare (carpetas, hf:NOMBRE...)
  run [--name NOMBRE] CONFIG_O_NOTEBOOK [ARGS...]
        lanza una ejecución en una sesión de tmux del servidor (sobrevive al cierre de SSH):
          CONFIG.yaml    python -m enlace.train CONFIG [ARGS...] --out runs/NOMBRE
                         (ARGS: cambios como train.seed=99 o init_from=runs/pretrain-2060, --fresh)
          NOTEBOOK.ipynb papermill NOTEBOOK runs/NOMBRE/report.ipynb [ARGS...] -p out runs/NOMBRE
                         (ARGS: los de papermill, p. ej. -p hardware turing-2060)
        NOMBRE: el del archivo de configuración (para un notebook: el de su config `-p run`, si no el del
        notebook). El entorno virtual del servidor lo crea scripts/_venv.sh.
  logs [NOMBRE] [--serve] [--no-follow]
        imprime el log de la ejecución (runs/NOMBRE/remote.log) y lo sigue hasta que acaba; --serve: el del
        servicio NOMBRE (home por defecto)
  status
        qué hay en el servidor: ejecuciones (en marcha, hecha, fallida) con su última línea de métricas, y servicios
  fetch [NOMBRE] [--with-checkpoints] [--to CARPETA]
        trae runs/NOMBRE a runs/remote/NOMBRE (o CARPETA): informes, métricas, archivos de modelo; checkpoints/
        solo con --with-checkpoints
  serve [--name NOMBRE] [--host DIRECCIÓN] [--port PUERTO] [--state CARPETA] MODELO [ARGS...]
        sirve un modelo terminado a la red de casa desde el servidor (python -m enlace.serve en una sesión de
        tmux; corre en la CPU del servidor y deja la GPU libre). MODELO: una ejecución del servidor (sft-2060 es
        runs/sft-2060) o la ruta de un archivo de modelo dentro de la copia. Escucha en 0.0.0.0:8000 (toda la
        red de casa; --host 127.0.0.1: solo el servidor), pide la clave de acceso de serve/token (se crea la
        primera vez) y guarda lo de la familia en state/ (--state). Imprime la URL y la clave. ARGS: los de
        enlace.serve, p. ej. --person Ana --zone Europe/Madrid. NOMBRE: home por defecto.
  serve --stop [--name NOMBRE]
        para el servicio (como Ctrl-C: cierra el estado de la familia limpio)
  help  este texto
En logs y fetch, NOMBRE es por defecto la última ejecución lanzada con run o prepare.

ajustes (.env en la raíz del repositorio, o el archivo que diga ENLACE_ENV_FILE; las variables de entorno mandan):
  ENLACE_REMOTE_HOST         nombre o IP del servidor (obligatorio)
  ENLACE_REMOTE_USER         usuario SSH en el servidor (obligatorio)
  ENLACE_REMOTE_PORT         puerto SSH (22 por defecto)
  ENLACE_REMOTE_KEY          archivo de clave privada (por defecto: ssh-agent y lo de ~/.ssh)
  ENLACE_REMOTE_DIR          la copia del repositorio en el servidor, absoluta o ~/relativa, p. ej. ~/enlace
                             (obligatorio)
  ENLACE_REMOTE_KNOWN_HOSTS  archivo known_hosts (por defecto el ~/.ssh/known_hosts del propio ssh)
  ENLACE_REMOTE_VENV         entorno virtual ya hecho en el servidor, en lugar del .venv de la copia (por defecto
                             ninguno: scripts/_venv.sh crea y mantiene DIR/.venv)
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
# a service's session: '+' is in no run name, so a service never shares a session with a run
serve_sess() { local s="enlace+serve-$1"; echo "${s//./_}"; }
latest() { [ -f "$dir/runs/.remote-last" ] && cat "$dir/runs/.remote-last"; }
job_or_latest() { local j="${1:-}"; [ -n "$j" ] || j="$(latest)" || true; [ -n "$j" ] || err "no run started yet in $dir"; echo "$j"; }
state_of() {  # state_of SESSION FOLDER: running | done | failed (exit N) | stopped
  local session="$1" rd="$2"
  if command -v tmux >/dev/null && T has-session -t "=$session" 2>/dev/null; then echo running
  elif [ -f "$rd/remote.exit" ]; then
    local rc; rc="$(cat "$rd/remote.exit")"
    if [ "$rc" = 0 ]; then echo done; else echo "failed (exit $rc)"; fi
  else echo stopped; fi
}
state() { state_of "$(sess "$1")" "$dir/runs/$1"; }
in_dir() { cd "$dir" 2>/dev/null || err "$dir does not exist on the server; run scripts/remote.sh sync first"; }
venv_of() {  # venv_of VENV: the virtualenv with ~/ expanded; refused when its python is missing
  local venv="$1"
  case "$venv" in "~/"*) venv="$HOME/${venv#\~/}" ;; esac
  if [ -n "$venv" ] && [ ! -x "$venv/bin/python" ]; then
    err "ENLACE_REMOTE_VENV: $venv/bin/python does not exist on the server"
  fi
  echo "$venv"
}
launch() {  # launch FOLDER SESSION VENV KIND CMD...: write FOLDER/remote-run.sh and start it in a new tmux session
  local rd="$1" session="$2" venv="$3" kind="$4"; shift 4
  mkdir -p "$rd" || err "cannot create $dir/$rd"
  rm -f "$rd/remote.exit" "$rd/remote.pid"
  {
    echo '#!/usr/bin/env bash'
    echo "# Written by scripts/remote.sh; runs in tmux session $session (tmux -L enlace attach -t '$session')."
    printf 'cd -- %q || exit 1\n' "$dir"
    printf 'rd=%q\nvenv=%q\nkind=%q\n' "$rd" "$venv" "$kind"
    printf 'cmd=(%s)\n' "$(printf '%q ' "$@")"
    cat <<'RUNNER'
exec >>"$rd/remote.log" 2>&1
echo $$ > "$rd/remote.pid"
trap 'rc=$?; echo "$rc" > "$rd/remote.exit"; echo "[remote] $(date "+%F %T") exit $rc"' EXIT
echo "[remote] $(date "+%F %T") start: ${cmd[*]}"
if [ -n "$venv" ]; then export PATH="$venv/bin:$PATH"; else source scripts/_venv.sh; fi
set +e
export PYTHONUNBUFFERED=1
# scripts/prepare_smoke_data.sh: the interpreter of the venv just chosen, not a second venv of its own
if [ "$kind" = prepare ]; then export ENLACE_PYTHON="$(command -v python)"; fi
"${cmd[@]}"
exit $?
RUNNER
  } > "$rd/remote-run.sh"
  T new-session -d -s "$session" -c "$dir" "bash $(shq "$dir/$rd/remote-run.sh")" \
    || err "tmux could not start session $session"
}
follow() {  # follow LOG FOLDER STATE FOLLOW: print the log; follow it while the job runs
  local log="$1" rd="$2" st="$3"
  if [ "$4" = 1 ] && [ "$st" = running ] && [ -f "$rd/remote.pid" ]; then
    exec tail -n 200 -F --pid="$(cat "$rd/remote.pid")" "$log"
  fi
  tail -n 200 "$log"
}
case "$cmd" in
  init)  # init DELETE: make the folder; --delete only into a folder that sync made
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
  run)  # run JOB KIND TARGET VENV ARGS...; KIND: config | notebook | prepare
    job="$1" kind="$2" target="$3"; shift 3
    in_dir
    [ -f "$target" ] || err "$target does not exist in $dir; run scripts/remote.sh sync first"
    command -v tmux >/dev/null || err "tmux is not installed on the server"
    session="$(sess "$job")"
    if T has-session -t "=$session" 2>/dev/null; then
      err "run '$job' is still running (scripts/remote.sh logs $job); pass --name for another run"
    fi
    venv="$(venv_of "$1")" || exit 1
    shift
    rd="runs/$job"
    case "$kind" in
      config) run_cmd=(python -m enlace.train "$target" "$@" --out "$rd") ;;
      notebook) run_cmd=(papermill "$target" "$rd/report.ipynb" --log-output "$@" -p out "$rd") ;;
      prepare) run_cmd=(bash "$target" "$@") ;;
      prepare-module) run_cmd=(python -m enlace.prepare "$@") ;;
      *) err "unknown run kind $kind" ;;
    esac
    launch "$rd" "$session" "$venv" "$kind" "${run_cmd[@]}"
    echo "$job" > runs/.remote-last
    echo "started '$job' on the server in tmux session $session (log: $dir/$rd/remote.log)" ;;
  serve)  # serve NAME VENV MODEL HOST PORT STATE WAIT_S ARGS...
    name="$1" model="$3" host="$4" port="$5" state_dir="$6" wait_s="$7"
    in_dir
    command -v tmux >/dev/null || err "tmux is not installed on the server"
    venv="$(venv_of "$2")" || exit 1
    shift 7
    session="$(serve_sess "$name")"
    if T has-session -t "=$session" 2>/dev/null; then
      err "service '$name' is already running (scripts/remote.sh serve --stop --name $name, or --name for another)"
    fi
    if [[ "$model" =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] && [ -d "runs/$model" ]; then model="runs/$model"
    elif [ ! -e "$model" ]; then
      err "no run '$model' in $dir/runs and no such file in $dir (scripts/remote.sh status lists the runs)"
    fi
    # the token: made once, on the server, readable by its user only; the family types it once into the page
    mkdir -p serve && chmod 700 serve || err "cannot create $dir/serve"
    if [ ! -s serve/token ]; then
      (umask 077 && od -An -tx1 -N24 /dev/urandom | tr -d ' \n' > serve/token) || err "cannot write $dir/serve/token"
    fi
    rd="serve/$name"
    launch "$rd" "$session" "$venv" serve \
      python -m enlace.serve "$model" --host "$host" --port "$port" --token-file serve/token --state "$state_dir" "$@"
    # the service prints "ENLACE at URL" once the model is loaded, then listens; a refusal ends it (remote.exit)
    case "$host" in 0.0.0.0) probe=127.0.0.1 ;; ::) probe=::1 ;; *) probe="$host" ;; esac
    listening() { grep -q '^ENLACE at ' "$rd/remote.log" 2>/dev/null && (exec 3<>"/dev/tcp/$probe/$port") 2>/dev/null; }
    waited=0
    until listening; do
      if [ -f "$rd/remote.exit" ]; then
        why="$(grep -v '^\[remote\]' "$rd/remote.log" | grep -v '^[[:space:]]*$' | tail -n 1)"
        err "the service did not start: ${why:-exit $(cat "$rd/remote.exit")} (log: $dir/$rd/remote.log)"
      fi
      if [ "$waited" -ge "$((wait_s * 5))" ]; then
        echo "the service is still starting after ${wait_s} s; follow it with: scripts/remote.sh logs --serve $name"
        break
      fi
      sleep 0.2
      waited=$((waited + 1))
    done
    echo "serving '$model' as '$name' in tmux session $session (log: $dir/$rd/remote.log)"
    grep '^ENLACE at ' "$rd/remote.log" | tail -n 1
    addrs="$( (hostname -I 2>/dev/null || hostname -i 2>/dev/null) | tr -s ' ' | sed 's/^ //; s/ $//')"
    echo "server addresses: ${addrs:-unknown}"
    echo "token: $(cat serve/token)" ;;
  serve-stop)  # serve-stop NAME
    name="$1"
    in_dir
    session="$(serve_sess "$name")"
    command -v tmux >/dev/null && T has-session -t "=$session" 2>/dev/null || err "no service '$name' is running"
    T send-keys -t "=$session:" C-c  # what Ctrl-C in the pane does: uvicorn shuts down, the state is closed cleanly
    for _ in $(seq 1 150); do T has-session -t "=$session" 2>/dev/null || break; sleep 0.2; done
    if T has-session -t "=$session" 2>/dev/null; then
      T kill-session -t "=$session"
      echo "service '$name' did not stop in 30 s: killed"
    else echo "stopped service '$name'"; fi ;;
  logs)  # logs JOB FOLLOW
    job="$(job_or_latest "$1")" || exit 1
    log="$dir/runs/$job/remote.log"
    [ -f "$log" ] || err "no log for run '$job' ($log)"
    follow "$log" "$dir/runs/$job" "$(state "$job")" "$2" ;;
  serve-logs)  # serve-logs NAME FOLLOW
    log="$dir/serve/$1/remote.log"
    [ -f "$log" ] || err "no log for service '$1' ($log)"
    follow "$log" "$dir/serve/$1" "$(state_of "$(serve_sess "$1")" "$dir/serve/$1")" "$2" ;;
  status)
    in_dir
    if command -v tmux >/dev/null; then
      sessions="$(T list-sessions -F '#{session_name}' 2>/dev/null | grep '^enlace[-+]' || true)"
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
    for sd in serve/*/; do
      [ -f "$sd/remote-run.sh" ] || continue
      n="$(basename "$sd")"
      at="$(grep '^ENLACE at ' "$sd/remote.log" 2>/dev/null | tail -n 1 | cut -c1-200)"
      printf 'service %-16s %-16s %s\n' "$n" "$(state_of "$(serve_sess "$n")" "$sd")" "${at:-(not listening)}"
    done
    [ -z "$sessions" ] || echo "tmux sessions: $(echo "$sessions" | tr '\n' ' ')" ;;
  latest) job_or_latest "" ;;
  exists) [ -d "$dir/runs/$1" ] || err "no run '$1' in $dir/runs" ;;
  *) err "unknown agent command $cmd" ;;
esac
AGENT
}

# ---- commands ------------------------------------------------------------------------------------------------
NAME_RE='^[A-Za-z0-9][A-Za-z0-9._-]*$'

data_path() {  # data_path PATH: PATH as a folder or file under data/, checked; echoes the clean relative path
  local p="${1#./}" c
  p="${p%/}"
  [[ "$p" == data || "$p" == data/* ]] || die "sync --data: '$1' is not under data/ (e.g. --data data/shards/es)"
  local parts
  IFS=/ read -ra parts <<< "$p"
  for c in "${parts[@]}"; do [ "$c" != .. ] || die "sync --data: '..' is not supported in '$1'"; done
  [ -e "$ROOT/$p" ] || die "sync --data: no such file or folder here: $p"
  printf '%s' "$p"
}

cmd_sync() {
  local delete=0 data=() p
  while [ $# -gt 0 ]; do
    case "$1" in
      --delete) delete=1 ;;
      --data)
        [ $# -ge 2 ] || die "sync: --data needs a path under data/"
        p="$(data_path "$2")" || exit 2
        data+=("$p")
        shift ;;
      --data=*) p="$(data_path "${1#--data=}")" || exit 2; data+=("$p") ;;
      *) die "sync: unknown argument '$1'" ;;
    esac
    shift
  done
  remote init "$delete"
  # state/ and serve/ are the served family's data and token on the server: never overwritten, never deleted
  local opts=(-a -s --exclude=/runs/ --exclude=/data/ --exclude=/state/ --exclude=/serve/ --exclude=/.venv/
              --exclude=/_docs/ --exclude=/_proc/ --exclude=/.git/ --include=/.env.example --exclude='/.env*'
              --exclude=__pycache__/ --exclude=.ipynb_checkpoints/ --exclude=.pytest_cache/ --exclude='*.egg-info/'
              --exclude=/.enlace-remote)
  [ "$delete" = 0 ] || opts+=(--delete)
  rsync "${opts[@]}" -e "$(rsync_ssh)" -- "$ROOT/" "$RSYNC_TARGET:$(rsync_dir)/" \
    || fail "rsync to $TARGET:$RDIR failed"
  echo "synced $ROOT -> $TARGET:$RDIR"
  for p in ${data[@]+"${data[@]}"}; do
    # -R with /./: the path below it is recreated on the server; -L: symlinked texts and shards arrive as files.
    # Never --delete: a prepare on the server may own more of data/ than this machine has.
    rsync -a -s -R -L -e "$(rsync_ssh)" -- "$ROOT/./$p" "$RSYNC_TARGET:$(rsync_dir)/" \
      || fail "rsync of $p to $TARGET:$RDIR failed"
    echo "synced $p -> $TARGET:$RDIR/$p"
  done
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
  [[ "$name" =~ $NAME_RE ]] || die "run: run name '$name' may only use letters, digits, '.', '_', '-'"
  remote run "$name" "$kind" "$target" "$VENV" "$@"
  echo "follow it with: scripts/remote.sh logs $name"
}

cmd_prepare() {
  local name=prepare-data
  while [ $# -gt 0 ]; do
    case "$1" in
      --name) [ $# -ge 2 ] || die "prepare: --name needs a value"; name="$2"; shift 2 ;;
      --name=*) name="${1#--name=}"; shift ;;
      *) break ;;
    esac
  done
  [[ "$name" =~ $NAME_RE ]] || die "prepare: name '$name' may only use letters, digits, '.', '_', '-'"
  if [ "${1:-}" = enlace.prepare ]; then  # the tokenizer and shards step alone, on any source (hf:..., a folder)
    shift
    remote run "$name" prepare-module enlace/prepare.py "$VENV" "$@"
  else
    remote run "$name" prepare scripts/prepare_smoke_data.sh "$VENV" "$@"
  fi
  echo "follow it with: scripts/remote.sh logs $name"
}

cmd_serve() {
  local name=home host=0.0.0.0 port=8000 state=state stop=0 model="" a
  while [ $# -gt 0 ]; do
    case "$1" in
      --stop) stop=1; shift ;;
      --name|--host|--port|--state)
        [ $# -ge 2 ] || die "serve: $1 needs a value"
        printf -v "${1#--}" '%s' "$2"; shift 2 ;;
      --name=*|--host=*|--port=*|--state=*) a="${1#--}"; printf -v "${a%%=*}" '%s' "${a#*=}"; shift ;;
      -*) die "serve: unknown option '$1' before the model (options of enlace.serve go after it)" ;;
      *) break ;;
    esac
  done
  [[ "$name" =~ $NAME_RE ]] || die "serve: name '$name' may only use letters, digits, '.', '_', '-'"
  if [ "$stop" = 1 ]; then
    [ $# = 0 ] || die "serve --stop takes no model (only --name)"
    remote serve-stop "$name"
    return
  fi
  [ $# -ge 1 ] || die "serve: which model? a run on the server (scripts/remote.sh serve sft-2060) or a model file"
  model="${1#./}"; shift
  [[ "$host" =~ ^[0-9A-Fa-f.:]+$ ]] \
    || die "serve: --host '$host' is not an IP address (0.0.0.0: the whole home network)"
  [[ "$port" =~ ^[0-9]+$ ]] && [ "$port" -ge 1 ] && [ "$port" -le 65535 ] \
    || die "serve: --port '$port' is not a port number"
  for a in "$@"; do
    case "$a" in
      --host|--host=*|--port|--port=*|--state|--state=*|--token-file|--token-file=*)
        die "serve: ${a%%=*} is set by remote.sh; put --host, --port, --state before the model" ;;
    esac
  done
  remote serve "$name" "$VENV" "$model" "$host" "$port" "$state" 300 "$@"
  local url_host="$host"
  case "$host" in 0.0.0.0|::) url_host="$HOST" ;; esac
  [[ "$url_host" != *:* ]] || url_host="[$url_host]"
  echo "open http://$url_host:$port/ on the home network (phone, laptop): the page asks once for the token above"
  echo "stop it with: scripts/remote.sh serve --stop$([ "$name" = home ] || echo " --name $name")"
}

cmd_logs() {
  local job="" follow=1 serve=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --no-follow) follow=0 ;; --serve) serve=1 ;; -*) die "logs: unknown option '$1'" ;; *) job="$1" ;;
    esac
    shift
  done
  # no pty: a local Ctrl-C or a dropped connection ends ssh; the remote tail ends with the job (or at its next
  # line, on the broken pipe); the job itself is never touched
  if [ "$serve" = 1 ]; then
    job="${job:-home}"
    [[ "$job" =~ $NAME_RE ]] || die "logs: bad service name '$job'"
    remote serve-logs "$job" "$follow"
  else
    remote logs "$job" "$follow"
  fi
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
    sync|prepare|run|logs|status|fetch|serve) ;;
    *) die "unknown command '$cmd' (commands: sync prepare run logs status fetch serve help)" ;;
  esac
  local tools=(ssh)
  case "$cmd" in sync|fetch) tools+=(rsync) ;; esac  # the other commands only talk over ssh
  for tool in "${tools[@]}"; do command -v "$tool" >/dev/null || die "$tool is not installed here"; done
  settings
  ERRF="$(mktemp)"
  "cmd_$cmd" "$@"
}

main "$@"
