#!/usr/bin/env bash
# Runs the parts listed in a queue file on the lent GPU, within one device call (10 minutes):
#   bash docs/results/gpu-queue.sh QUEUE_FILE
# A queue line is `NAME SECONDS COMMAND...`: a part's name, an estimate of its duration, and
# the shell command that runs it (writing its files to $OUT). A part is skipped when it ran
# already: named in done.txt beside the queue file (committed with its results, so a later
# session resumes with the same command), a marker in .gpu-done/ (the parts whose files came
# back this session, carried with the call) or in /tmp/eaq-queue-done (this machine, while
# it stays warm). No part starts when its
# estimate would take the call past DEADLINE_S (default 570) seconds, so the call ends
# before its time limit with every started part complete. Durations go to $OUT/queue.txt.
# A part's sweep resumes across calls only if eaq's code is unchanged between them: the resume hash holds it
# (eaq.files.code_identity; an edit of the report, diff or rerun code excepted), and a run of other code is measured again.
set -uo pipefail
QUEUE=$1 DEADLINE=${DEADLINE_S:-570}
mkdir -p /tmp/eaq-queue-done
python3 -c "import eaq, torchao" 2>/dev/null || bash docs/results/gpu-install.sh
while read -r name estimate command; do
  [[ -z $name || $name == \#* ]] && continue
  [[ -e .gpu-done/$name || -e /tmp/eaq-queue-done/$name ]] && continue
  grep -qx "$name" "$(dirname "$QUEUE")/done.txt" 2>/dev/null && continue
  if (( SECONDS + estimate > DEADLINE )); then
    echo "queue: $name not started (${SECONDS} s in, estimate $estimate s)" | tee -a $OUT/queue.txt
    continue
  fi
  start=$SECONDS
  bash -c "$command"
  touch /tmp/eaq-queue-done/$name
  echo "queue: $name took $((SECONDS - start)) s (estimate $estimate s)" | tee -a $OUT/queue.txt
done < "$QUEUE"
