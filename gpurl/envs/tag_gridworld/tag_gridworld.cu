// tag_gridworld in CUDA C: the kernel the toolkit builds from kernels.py's phases (gpurl.envs.lifecycle:
// the env's step and start phases, and the toolkit's episode phases), phase for phase, over the same
// buffers (struct of arrays, same dtypes) and with the same counter-based RNG, so its output is bit for
// bit the Numba build's. Spec: docs/specs/tag_gridworld.md.
//
// Launch: one block per env (grid = num_envs), threads stride over agents (any block size), and
// __syncthreads() between phases, as gpurl.kernels.program builds the Numba kernel. A launch with
// launch = RESET is env.reset: only the start phases run, for the envs whose restart[e] the host set.
// An env ended with autoreset=False (status ENDED) is skipped by the step phases: reward 0, obs unchanged.
// The global state (grid_write_state) is written after the step phases and after the start phases, unless
// write_global_state is 0 (an env made with global_state=False: its state buffers are empty, [E, 0]).
//
// Loaded by TagGridworld(kernel_source="cuda_c") through gpurl.kernels.cuda_c.CudaCModule; the cpu test
// tier builds this file as plain C++ (gpurl_host.h) and compares it with the Numba CPU build.
#include "gpurl.cuh"

// Every argument of one launch, in kernel-parameter order (the env's arrays, then its constants: see
// TagGridworld.kernel_tensors and KernelEnv's array and constant order).
struct Grid {
    int num_envs, num_agents, obs_dim;
    float* obs;                 // [E, N, obs_dim]
    float* final_obs;           // [E, N, obs_dim]
    float* reward;              // [E, N]
    unsigned char* terminated;  // [E] (torch.bool)
    unsigned char* truncated;   // [E] (torch.bool)
    float* global_state;        // [E, STATE_FEATURES * N + 1]
    float* final_global_state;  // [E, STATE_FEATURES * N + 1]
    int* x;                     // [E, N] cells 0..grid_length
    int* y;                     // [E, N]
    int* timestep;              // [E]
    unsigned char* hit_wall;    // [E, N] this step's move was clipped
    float* tags;                // [E] 1 when the runner was tagged in this step
    const float* reward_table;  // [2 is_runner, 2 tagged, 2 hit_wall]
    int* episode;               // [E] episodes started: the counter of the start draws
    unsigned char* status;      // [E] RUNNING, or ENDED (autoreset=False) until reset
    unsigned char* restart;     // [E] starts a new episode in this launch
    int num_taggers;            // also the runner's index
    int grid_length;
    float length_f32;           // grid_length, the obs divisor
    int episode_length;
    float time_norm;            // episode_length, the obs divisor
    int full_obs, random_start, center;
    unsigned long long seed;
    long long env_id_offset;
    int autoreset, launch;      // launch: STEP or RESET
    int write_global_state;     // 0: no global state written or copied (global_state=False)
    const void* actions;        // [E, N, 1] int32 or int64 (action_bytes 4 or 8); null in reset launches
    int action_bytes;
};

enum { STREAM_X = 0, STREAM_Y = 1 };
enum { NUM_MOVES = 5 };             // stay, +x, -x, +y, -y (kernels.py NUM_MOVES)
enum { STATE_FEATURES = 3 };        // x, y, is the runner: each agent's share of the global state (kernels.py)
enum { STEP = 0, RESET = 1 };        // gpurl.envs.lifecycle
enum { RUNNING = 0, ENDED = 1 };

// Flat index of agent i of env e in an [E, N] array (64-bit: E * N * obs_dim may pass 2**31).
__device__ __forceinline__ long long grid_at(const Grid& g, int e, int i) {
    return static_cast<long long>(e) * g.num_agents + i;
}

// Width S of the global state: every agent's features, then the time.
__device__ __forceinline__ int grid_state_dim(const Grid& g) {
    return STATE_FEATURES * g.num_agents + 1;
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

// Agent i's features of the global state (docs/specs/global_state.md); agent 0 also writes the time.
__device__ void grid_write_state(const Grid& g, int e, int i) {
    float* row = g.global_state + static_cast<long long>(e) * grid_state_dim(g);
    const long long k = grid_at(g, e, i);
    const int f = i * STATE_FEATURES;
    row[f] = static_cast<float>(g.x[k]) / g.length_f32;
    row[f + 1] = static_cast<float>(g.y[k]) / g.length_f32;
    row[f + 2] = i == g.num_taggers ? 1.0f : 0.0f;
    if (i == 0) row[STATE_FEATURES * g.num_agents] = static_cast<float>(g.timestep[e]) / g.time_norm;
}

// ---- step phases (for envs that take this step) --------------------------------------------------------

__device__ __forceinline__ bool grid_stepping(const Grid& g, int e) {
    return g.launch == STEP && g.status[e] == RUNNING;
}

// Spec step 1 for agent i: move by its action, clip each coordinate to [0, L], note a wall hit.
__device__ void grid_move(const Grid& g, int e, int i) {
    const long long k = grid_at(g, e, i);
    // An out-of-range action (only reachable with validate=False) is clamped into 0..4, as the Numba
    // source's clamp_action does (docs/specs/API.md).
    const long long raw = grid_action(g, k);
    const long long a = raw < 0 ? 0 : (raw >= NUM_MOVES ? NUM_MOVES - 1 : raw);
    int x = g.x[k];
    int y = g.y[k];
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

// Per env (thread 0): spec steps 1 (timestep + 1), 2 (tagged), 4 (terminated/truncated).
__device__ void grid_clock_and_tag(const Grid& g, int e) {
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
    g.tags[e] = tagged ? 1.0f : 0.0f;
    g.terminated[e] = tagged;
    g.truncated[e] = g.timestep[e] == g.episode_length && !tagged;
}

// Spec step 3 (reward from the table) and the observation of the moved state.
__device__ void grid_reward_and_observe(const Grid& g, int e, int i) {
    const long long k = grid_at(g, e, i);
    const int is_runner = i == g.num_taggers ? 1 : 0;
    const int tagged = g.tags[e] != 0.0f ? 1 : 0;
    g.reward[k] = g.reward_table[(is_runner * 2 + tagged) * 2 + g.hit_wall[k]];
    grid_observe(g, e, i, g.obs);
}

// ---- the toolkit's episode phases (gpurl.envs.lifecycle) ------------------------------------------------

// Per env (thread 0), after the step: the env restarts (autoreset) or stays ended (status ENDED: reward and
// metrics 0 from now on); a reset launch clears the flags of the envs it resets.
__device__ void grid_settle(const Grid& g, int e) {
    if (g.launch != STEP) {
        if (g.restart[e] != 0) {
            g.status[e] = RUNNING;
            g.terminated[e] = 0;
            g.truncated[e] = 0;
            g.tags[e] = 0.0f;
        }
        return;
    }
    if (g.status[e] != RUNNING) {
        for (int i = 0; i < g.num_agents; ++i) g.reward[grid_at(g, e, i)] = 0.0f;
        g.tags[e] = 0.0f;
        g.restart[e] = 0;
        return;
    }
    const bool ended = g.terminated[e] != 0 || g.truncated[e] != 0;
    g.restart[e] = (ended && g.autoreset != 0) ? 1 : 0;
    if (ended && g.autoreset == 0) g.status[e] = ENDED;
}

// An autoresetting env's last observation of agent i, and its share (features i, i + N, ...) of the last
// global state, of the episode that ended, before the new one overwrites them.
__device__ void grid_copy_final_outputs(const Grid& g, int e, int i) {
    const long long row = grid_at(g, e, i) * g.obs_dim;
    for (int f = 0; f < g.obs_dim; ++f) g.final_obs[row + f] = g.obs[row + f];
    if (g.write_global_state == 0) return;
    const int state_dim = grid_state_dim(g);
    const long long state_row = static_cast<long long>(e) * state_dim;
    for (int f = i; f < state_dim; f += g.num_agents) {
        g.final_global_state[state_row + f] = g.global_state[state_row + f];
    }
}

// ---- the kernel ------------------------------------------------------------------------------------------

extern "C" __global__ void tag_gridworld_step(
    int num_envs, int num_agents, int obs_dim,
    float* obs, float* final_obs, float* reward, unsigned char* terminated, unsigned char* truncated,
    float* global_state, float* final_global_state,
    int* x, int* y, int* timestep, unsigned char* hit_wall, float* tags, const float* reward_table,
    int* episode, unsigned char* status, unsigned char* restart,
    int num_taggers, int grid_length, float length_f32, int episode_length, float time_norm,
    int full_obs, int random_start, int center, unsigned long long seed, long long env_id_offset,
    int autoreset, int launch, int write_global_state,
    const void* actions, int action_bytes)
{
    const Grid g = {num_envs, num_agents, obs_dim, obs, final_obs, reward, terminated, truncated, global_state,
                    final_global_state, x, y, timestep, hit_wall, tags, reward_table, episode, status, restart,
                    num_taggers, grid_length, length_f32, episode_length, time_norm, full_obs, random_start, center,
                    seed, env_id_offset, autoreset, launch, write_global_state, actions, action_bytes};
    const int e = blockIdx.x;
    if (e >= num_envs) return;  // the whole block leaves together: no barrier is skipped by half a block
    const int t = threadIdx.x;
    const int stride = blockDim.x;
    // Every thread of the block reads the same per-env flags between barriers: the branches are uniform.
    if (grid_stepping(g, e)) {
        for (int i = t; i < num_agents; i += stride) grid_move(g, e, i);
    }
    __syncthreads();
    if (t == 0 && grid_stepping(g, e)) grid_clock_and_tag(g, e);
    __syncthreads();
    if (grid_stepping(g, e)) {
        for (int i = t; i < num_agents; i += stride) grid_reward_and_observe(g, e, i);
    }
    __syncthreads();
    if (g.write_global_state != 0 && grid_stepping(g, e)) {
        for (int i = t; i < num_agents; i += stride) grid_write_state(g, e, i);
    }
    __syncthreads();
    if (t == 0) grid_settle(g, e);
    __syncthreads();
    if (g.launch == STEP && g.restart[e] != 0) {
        for (int i = t; i < num_agents; i += stride) grid_copy_final_outputs(g, e, i);
    }
    __syncthreads();
    if (g.restart[e] != 0) {
        for (int i = t; i < num_agents; i += stride) grid_draw_agent(g, e, i);
    }
    __syncthreads();
    if (t == 0 && g.restart[e] != 0) g.timestep[e] = 0;
    __syncthreads();
    if (g.restart[e] != 0) {
        for (int i = t; i < num_agents; i += stride) grid_observe(g, e, i, g.obs);
    }
    __syncthreads();
    if (g.write_global_state != 0 && g.restart[e] != 0) {
        for (int i = t; i < num_agents; i += stride) grid_write_state(g, e, i);
    }
    __syncthreads();
    if (t == 0 && g.restart[e] != 0) g.episode[e] += 1;
}
