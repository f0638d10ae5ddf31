# Sourced by the h200.sh scripts: run a command that starts vLLM, once more if its start-up lost a race.
#
# vLLM measures the GPU's free memory when it starts and again after profiling the model; when another
# process sharing the GPU frees memory in between, the second reading is the larger and vLLM refuses to
# start ("Error in memory profiling. Initial free memory 124.4 GiB, current free memory 137.75 GiB. This
# happens when other processes sharing the same container release GPU memory while vLLM is profiling").
# benchmarks/gpu_pipeline/pipeline.sh runs several evaluations and trainers on one H200, so one finishing while
# the next starts is routine: on 2026-12-01 it failed select once and the last evaluation of the
# second DeepSearch arm (too late for the pipeline's own retry). The same race has a second face: when
# another process takes memory while vLLM profiles, vLLM counts it as its own and finds "No available
# memory for the cache blocks" (2026-12-02b: four engines started in the same second after three trainers
# ended, and one validation lost two checkpoints). Nothing is wrong with the run, so trying again a little
# later is the whole fix; the pause has a random part so that engines which raced once do not start
# together again. Any other failure is returned as it is.
#
#   vllm_start LOG CMD...      # CMD's output is appended to LOG; exit status: CMD's (of the last attempt)
vllm_start() {
  local log=$1 before rc=0; shift
  before=0; [ -f "$log" ] && before=$(wc -l < "$log")  # the first evaluation of a run has no log yet
  "$@" >> "$log" 2>&1 || rc=$?
  if [ "$rc" -ne 0 ] && tail -n +"$((before + 1))" "$log" \
      | grep -q -e "Error in memory profiling" -e "No available memory for the cache blocks"; then
    echo "vllm_start: vLLM's start-up memory check lost a race with another process; trying once more" >> "$log"
    local pause=${VLLM_RETRY_PAUSE:-15}
    sleep "$(( pause + RANDOM % (pause + 1) ))"
    rc=0; "$@" >> "$log" 2>&1 || rc=$?
  fi
  return "$rc"
}
