// launch <<<288, 256, 0>>>
extern "C" __global__ void __launch_bounds__(256) bias_grad(const float* DLC_RESTRICT p0, const unsigned char* DLC_RESTRICT p1, float* DLC_RESTRICT p2) {
  __shared__ double dlc_warp_sum[32];
  static double dlc_part[288];
  static unsigned int dlc_done[32];
  for (long long bo = blockIdx.x; bo < 288LL; bo += gridDim.x) {
    const long long o = bo / 9LL, k_from = bo % 9LL * 1024LL;
    const long long k_end = k_from + 1024LL < 9216LL ? k_from + 1024LL : 9216LL;
    double acc = 0;
    for (long long k = k_from + threadIdx.x; k < k_end; k += blockDim.x) {
      const long long i = o * 144LL + (k / 144LL) * 4608LL + (k % 144LL);
      const float r0 = p0[i];
      const float r1 = (float)(p1[i]);
      const float r2 = 0.0f;
      const float r3 = (r1 != 0.0f) ? r0 : r2;
      acc += r3;
    }
    for (int w = 16; w > 0; w >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, w);
    if ((threadIdx.x & 31) == 0) dlc_warp_sum[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
      double t = 0;
      for (int w = 0; w < (int)(blockDim.x >> 5); w++) t += dlc_warp_sum[w];
      dlc_part[bo] = t;
      __threadfence();
      if (atomicAdd(&dlc_done[o], 1u) == 8u) {
        __threadfence();
        double total = 0;
        for (int j = 0; j < 9; j++) total += ((volatile double*)dlc_part)[o * 9LL + j];
        p2[o] = (float)total;
        dlc_done[o] = 0u;
      }
    }
    __syncthreads();
  }
}
