// launch <<<512, 96, 528>>>
extern "C" __global__ void __launch_bounds__(256) softmax(const float* DLC_RESTRICT p0, float* DLC_RESTRICT p1) {
  extern __shared__ float dlc_row[];
  __shared__ float dlc_warp[32];
  __shared__ double dlc_warp_sum[32];
  for (long long row = blockIdx.x; row < 512LL; row += gridDim.x) {
    {
      float acc = __int_as_float((int)0xff800000);
      for (long long j = threadIdx.x; j < 65LL; j += blockDim.x) {
        const float v = p0[row * 65LL + j];
        acc = dlc_max(acc, v);
      }
      for (int w = 16; w > 0; w >>= 1) { const float o = __shfl_down_sync(0xffffffffu, acc, w); acc = dlc_max(acc, o); }
      if ((threadIdx.x & 31) == 0) dlc_warp[threadIdx.x >> 5] = acc;
      __syncthreads();
      if (threadIdx.x == 0) {
        acc = dlc_warp[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) { const float o = dlc_warp[w]; acc = dlc_max(acc, o); }
        dlc_row[0] = (float)acc;
      }
    }
    __syncthreads();
    for (long long j = threadIdx.x; j < 65LL; j += blockDim.x) {
      const float r0 = p0[(row * 65LL + j)];
      const float r1 = dlc_row[0];
      const float r2 = r0 - r1;
      const float r3 = dlc_exp(r2);
      dlc_row[1 + j] = r3;
    }
    __syncthreads();
    {
      double acc = 0.0;
      for (long long j = threadIdx.x; j < 65LL; j += blockDim.x) {
        const float v = dlc_row[1 + j];
        acc += v;
      }
      for (int w = 16; w > 0; w >>= 1) { const double o = __shfl_down_sync(0xffffffffu, acc, w); acc += o; }
      if ((threadIdx.x & 31) == 0) dlc_warp_sum[threadIdx.x >> 5] = acc;
      __syncthreads();
      if (threadIdx.x == 0) {
        acc = dlc_warp_sum[0];
        for (int w = 1; w < (int)(blockDim.x >> 5); w++) { const double o = dlc_warp_sum[w]; acc += o; }
        dlc_row[66] = (float)acc;
      }
    }
    __syncthreads();
    for (long long j = threadIdx.x; j < 65LL; j += blockDim.x) {
      const float r0 = dlc_row[1 + j];
      const float r1 = dlc_row[66];
      const float r2 = r0 / r1;
      dlc_row[67 + j] = r2;
    }
    __syncthreads();
    for (long long j = threadIdx.x; j < 65LL; j += blockDim.x) {
      p1[row * 65LL + j] = dlc_row[67 + j];
    }
    __syncthreads();
  }
}
