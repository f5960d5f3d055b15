// launch <<<32, 256, 0>>>
extern "C" __global__ void __launch_bounds__(256) bias_grad(const float* DLC_RESTRICT p0, const unsigned char* DLC_RESTRICT p1, float* DLC_RESTRICT p2) {
  __shared__ double dlc_warp_sum[32];
  for (long long o = blockIdx.x; o < 32LL; o += gridDim.x) {
    double acc = 0;
    for (long long k = threadIdx.x; k < 9216LL; k += blockDim.x) {
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
      p2[o] = (float)t;
    }
    __syncthreads();
  }
}
