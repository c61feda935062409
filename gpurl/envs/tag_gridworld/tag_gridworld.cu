// tag_gridworld in CUDA C: the kernel of kernels.py (gridworld_step), phase for phase, over the same
// buffers (struct of arrays, same dtypes) and with the same counter-based RNG, so its output is bit for
// bit the Numba build's. Spec: shared/specs/tag_gridworld.md.
//
// Launch: one block per env (grid = num_envs), threads stride over agents (any block size), and
// __syncthreads() between phases, as gpurl.kernels.program builds the Numba kernel. A launch with
// reset_only = 1 is env.reset: only the restart phases run, for the envs whose restart[e] the host set.
// An env frozen by autoreset=False (finished[e]) is skipped by every phase: reward 0, obs unchanged.
//
// Loaded by TagGridworld(kernel_source="cuda_c") through gpurl.kernels.cuda_c.CudaCModule; the cpu test
// tier builds this file as plain C++ (gpurl_host.h) and compares it with the Numba CPU build.
#include "gpurl.cuh"

// Every argument of one launch, in kernel-parameter order (layout.GridArrays, then layout.GridConsts).
struct Grid {
    int num_envs, num_agents, obs_dim;
    int* x;                     // [E, N] cells 0..grid_length
    int* y;                     // [E, N]
    int* timestep;              // [E]
    int* episode;               // [E] episodes started: the counter of the reset draws
    float* obs;                 // [E, N, obs_dim]
    float* final_obs;           // [E, N, obs_dim]
    float* reward;              // [E, N]
    unsigned char* terminated;  // [E] (torch.bool)
    unsigned char* truncated;   // [E] (torch.bool)
    float* tags;                // [E] 1 when the runner was tagged in this step
    unsigned char* finished;    // [E] ended and frozen until reset (autoreset=False)
    unsigned char* restart;     // [E] starts a new episode in this launch
    unsigned char* hit_wall;    // [E, N] this step's move was clipped
    const float* reward_table;  // [2 is_runner, 2 tagged, 2 hit_wall]
    int num_taggers;            // also the runner's index
    int grid_length;
    float length_f32;           // grid_length, the obs divisor
    int episode_length;
    float time_norm;            // episode_length, the obs divisor
    int full_obs, random_start, center, autoreset, reset_only;
    unsigned long long seed;
    long long env_id_offset;
    const void* actions;        // [E, N, 1] int32 or int64 (action_bytes 4 or 8); null in reset launches
    int action_bytes;
};

enum { STREAM_X = 0, STREAM_Y = 1 };

// Flat index of agent i of env e in an [E, N] array (64-bit: E * N * obs_dim may pass 2**31).
__device__ __forceinline__ long long grid_at(const Grid& g, int e, int i) {
    return static_cast<long long>(e) * g.num_agents + i;
}

__device__ __forceinline__ long long grid_action(const Grid& g, long long k) {
    if (g.action_bytes == 8) return static_cast<const long long*>(g.actions)[k];
    return static_cast<const int*>(g.actions)[k];
}

// ---- shared device functions ------------------------------------------------------------------------

// New-episode start of agent i: a uniform cell (random_start) or the original's fixed start.
__device__ void grid_draw_agent(const Grid& g, int e, int i) {
    const long long k = grid_at(g, e, i);
    if (g.random_start != 0) {
        const long long env_id = g.env_id_offset + e;
        const int episode = g.episode[e];
        const long long cells = static_cast<long long>(g.grid_length) + 1;
        g.x[k] = gpurl_random_below(g.seed, env_id, i, episode, STREAM_X, cells);
        g.y[k] = gpurl_random_below(g.seed, env_id, i, episode, STREAM_Y, cells);
    } else if (i < g.num_taggers) {
        g.x[k] = g.center;
        g.y[k] = g.center;
    } else {
        g.x[k] = 0;
        g.y[k] = 0;
    }
}

// Agent i's observation row (full or partial) of the current state, into obs [E, N, obs_dim].
__device__ void grid_observe(const Grid& g, int e, int i, float* obs) {
    float* row = obs + grid_at(g, e, i) * g.obs_dim;
    const int n = g.num_agents;
    const int runner = g.num_taggers;
    const int* xs = g.x + grid_at(g, e, 0);
    const int* ys = g.y + grid_at(g, e, 0);
    const float time = static_cast<float>(g.timestep[e]) / g.time_norm;
    if (g.full_obs != 0) {
        for (int j = 0; j < n; ++j) {
            row[j] = static_cast<float>(xs[j]) / g.length_f32;
            row[n + j] = static_cast<float>(ys[j]) / g.length_f32;
            row[2 * n + j] = j == runner ? 1.0f : 0.0f;
            row[3 * n + j] = j == i ? 1.0f : 0.0f;
        }
        row[4 * n] = time;
        return;
    }
    int target = runner;
    if (i == runner) {  // nearest tagger by Manhattan distance; strict < keeps the lowest index on ties
        const int rx = xs[runner], ry = ys[runner];
        int nearest = abs(xs[0] - rx) + abs(ys[0] - ry);
        target = 0;
        for (int m = 1; m < g.num_taggers; ++m) {
            const int d = abs(xs[m] - rx) + abs(ys[m] - ry);
            if (d < nearest) {
                nearest = d;
                target = m;
            }
        }
    }
    row[0] = static_cast<float>(xs[i]) / g.length_f32;
    row[1] = static_cast<float>(ys[i]) / g.length_f32;
    row[2] = static_cast<float>(xs[target]) / g.length_f32;
    row[3] = static_cast<float>(ys[target]) / g.length_f32;
    row[4] = i == runner ? 1.0f : 0.0f;
    row[5] = time;
}

// ---- step phases ---------------------------------------------------------------------------------------

// Spec step 1 for agent i: move by its action, clip each coordinate to [0, L], note a wall hit.
__device__ void grid_move(const Grid& g, int e, int i) {
    if (g.reset_only != 0) return;
    const long long k = grid_at(g, e, i);
    if (g.finished[e] != 0) {
        g.reward[k] = 0.0f;
        return;
    }
    const long long a = grid_action(g, k);
    int x = g.x[k];
    int y = g.y[k];
    // Unknown actions (only reachable with validate=False) stay put rather than index anything.
    if (a == 1) x += 1;
    else if (a == 2) x -= 1;
    else if (a == 3) y += 1;
    else if (a == 4) y -= 1;
    const int cx = x < 0 ? 0 : (x > g.grid_length ? g.grid_length : x);
    const int cy = y < 0 ? 0 : (y > g.grid_length ? g.grid_length : y);
    g.x[k] = cx;
    g.y[k] = cy;
    g.hit_wall[k] = (cx != x || cy != y) ? 1 : 0;
}

// Per env (thread 0): spec steps 1 (timestep + 1), 2 (tagged), 4 (terminated/truncated); who restarts.
__device__ void grid_clock_and_tag(const Grid& g, int e) {
    if (g.reset_only != 0) return;
    if (g.finished[e] != 0) {
        g.tags[e] = 0.0f;  // a frozen env tags nobody (step_metrics reads this)
        g.restart[e] = 0;
        return;
    }
    g.timestep[e] += 1;
    const int* xs = g.x + grid_at(g, e, 0);
    const int* ys = g.y + grid_at(g, e, 0);
    const int runner = g.num_taggers;
    bool tagged = false;
    for (int m = 0; m < g.num_taggers; ++m) {
        if (xs[m] == xs[runner] && ys[m] == ys[runner]) {
            tagged = true;
            break;
        }
    }
    const bool truncated = g.timestep[e] == g.episode_length && !tagged;
    g.tags[e] = tagged ? 1.0f : 0.0f;
    g.terminated[e] = tagged;
    g.truncated[e] = truncated;
    g.restart[e] = ((tagged || truncated) && g.autoreset != 0) ? 1 : 0;
}

// Spec step 3 (reward from the table) and the observation of the moved state.
__device__ void grid_reward_and_observe(const Grid& g, int e, int i) {
    if (g.reset_only != 0 || g.finished[e] != 0) return;
    const long long k = grid_at(g, e, i);
    const int is_runner = i == g.num_taggers ? 1 : 0;
    const int tagged = g.tags[e] != 0.0f ? 1 : 0;
    g.reward[k] = g.reward_table[(is_runner * 2 + tagged) * 2 + g.hit_wall[k]];
    // An env that restarts in this step shows its new episode in obs (last phase); this is its last obs.
    grid_observe(g, e, i, g.restart[e] != 0 ? g.final_obs : g.obs);
}

// ---- restarts: same-step autoreset, or reset ------------------------------------------------------------

__device__ void grid_restart_agents(const Grid& g, int e, int i) {
    if (g.restart[e] != 0) grid_draw_agent(g, e, i);
}

// Per env (thread 0): freeze an ended env (autoreset=False, after its last reward and obs are written),
// or start the new episode of a restarting one.
__device__ void grid_end_or_restart_env(const Grid& g, int e) {
    if (g.reset_only == 0 && g.autoreset == 0 && (g.terminated[e] != 0 || g.truncated[e] != 0)) g.finished[e] = 1;
    if (g.restart[e] == 0) return;
    g.timestep[e] = 0;
    g.episode[e] += 1;
    g.finished[e] = 0;
    if (g.reset_only != 0) {  // an autoreset reports how the episode ended; a reset clears it
        g.terminated[e] = 0;
        g.truncated[e] = 0;
        g.tags[e] = 0.0f;
    }
}

__device__ void grid_restart_observe(const Grid& g, int e, int i) {
    if (g.restart[e] != 0) grid_observe(g, e, i, g.obs);
}

// ---- the kernel ------------------------------------------------------------------------------------------

extern "C" __global__ void tag_gridworld_step(
    int num_envs, int num_agents, int obs_dim,
    int* x, int* y, int* timestep, int* episode,
    float* obs, float* final_obs, float* reward, unsigned char* terminated, unsigned char* truncated, float* tags,
    unsigned char* finished, unsigned char* restart, unsigned char* hit_wall, const float* reward_table,
    int num_taggers, int grid_length, float length_f32, int episode_length, float time_norm,
    int full_obs, int random_start, int center, int autoreset, int reset_only,
    unsigned long long seed, long long env_id_offset,
    const void* actions, int action_bytes)
{
    const Grid g = {num_envs, num_agents, obs_dim, x, y, timestep, episode, obs, final_obs, reward, terminated,
                    truncated, tags, finished, restart, hit_wall, reward_table, num_taggers, grid_length,
                    length_f32, episode_length, time_norm, full_obs, random_start, center, autoreset, reset_only,
                    seed, env_id_offset, actions, action_bytes};
    const int e = blockIdx.x;
    if (e >= num_envs) return;  // the whole block leaves together: no barrier is skipped by half a block
    const int t = threadIdx.x;
    const int stride = blockDim.x;

    for (int i = t; i < num_agents; i += stride) grid_move(g, e, i);
    __syncthreads();
    if (t == 0) grid_clock_and_tag(g, e);
    __syncthreads();
    for (int i = t; i < num_agents; i += stride) grid_reward_and_observe(g, e, i);
    __syncthreads();
    for (int i = t; i < num_agents; i += stride) grid_restart_agents(g, e, i);
    __syncthreads();
    if (t == 0) grid_end_or_restart_env(g, e);
    __syncthreads();
    for (int i = t; i < num_agents; i += stride) grid_restart_observe(g, e, i);
}
