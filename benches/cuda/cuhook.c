// LD_PRELOAD shim: counts and times the CUDA driver calls a run makes (launches, allocations,
// copies, synchronisations, module loads) and the launches by kernel name; prints tables at exit.
// For a per-step anatomy on a machine without nsys.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include <time.h>
typedef int CUresult; typedef void* P; typedef unsigned long long D;
enum { LAUNCH, ALLOC, ALLOCA, FREE, FREEA, DTOH, DTOHA, HTOD, HTODA, SSYNC, CSYNC, MLOAD, MLOADX, DTOD, DTODA, MEMSET, EREC, EWAIT, ECREATE, EDESTROY, GETFN, N };
static const char* names[N] = {"cuLaunchKernel","cuMemAlloc_v2","cuMemAllocAsync","cuMemFree_v2","cuMemFreeAsync","cuMemcpyDtoH_v2","cuMemcpyDtoHAsync_v2","cuMemcpyHtoD_v2","cuMemcpyHtoDAsync_v2","cuStreamSynchronize","cuCtxSynchronize","cuModuleLoadData","cuModuleLoadDataEx","cuMemcpyDtoD_v2","cuMemcpyDtoDAsync_v2","cuMemsetD8Async","cuEventRecord","cuStreamWaitEvent","cuEventCreate","cuEventDestroy_v2","cuModuleGetFunction"};
static unsigned long long cnt[N]; static double secs[N];
static double now(void){struct timespec t; clock_gettime(CLOCK_MONOTONIC,&t); return t.tv_sec+t.tv_nsec*1e-9;}
#define REAL(i, T) static __typeof__(T) real; if(!real) real=(T)dlsym(RTLD_NEXT,names[i]); double t0=now();
#define DONE(i) secs[i]+=now()-t0; cnt[i]++; return r;
// launches by kernel: CUfunction -> name (from cuModuleGetFunction), open addressing on the handle
#define SLOTS 8192
static struct { P f; char name[96]; unsigned long long n; } fns[SLOTS];
static unsigned slot(P f){unsigned i=(unsigned)(((size_t)f>>4)*2654435761u)%SLOTS; while(fns[i].f&&fns[i].f!=f) i=(i+1)%SLOTS; return i;}
CUresult cuLaunchKernel(P f,unsigned a,unsigned b,unsigned c,unsigned d,unsigned e,unsigned g,unsigned s,P st,P* p,P* x){REAL(LAUNCH,CUresult(*)(P,unsigned,unsigned,unsigned,unsigned,unsigned,unsigned,unsigned,P,P*,P*)) CUresult r=real(f,a,b,c,d,e,g,s,st,p,x); unsigned k=slot(f); fns[k].f=f; fns[k].n++; DONE(LAUNCH)}
CUresult cuMemAlloc_v2(D* p,size_t n){REAL(ALLOC,CUresult(*)(D*,size_t)) CUresult r=real(p,n); DONE(ALLOC)}
CUresult cuMemAllocAsync(D* p,size_t n,P s){REAL(ALLOCA,CUresult(*)(D*,size_t,P)) CUresult r=real(p,n,s); DONE(ALLOCA)}
CUresult cuMemFree_v2(D p){REAL(FREE,CUresult(*)(D)) CUresult r=real(p); DONE(FREE)}
CUresult cuMemFreeAsync(D p,P s){REAL(FREEA,CUresult(*)(D,P)) CUresult r=real(p,s); DONE(FREEA)}
CUresult cuMemcpyDtoH_v2(P d,D s,size_t n){REAL(DTOH,CUresult(*)(P,D,size_t)) CUresult r=real(d,s,n); DONE(DTOH)}
CUresult cuMemcpyDtoHAsync_v2(P d,D s,size_t n,P st){REAL(DTOHA,CUresult(*)(P,D,size_t,P)) CUresult r=real(d,s,n,st); DONE(DTOHA)}
CUresult cuMemcpyHtoD_v2(D d,const void* s,size_t n){REAL(HTOD,CUresult(*)(D,const void*,size_t)) CUresult r=real(d,s,n); DONE(HTOD)}
CUresult cuMemcpyHtoDAsync_v2(D d,const void* s,size_t n,P st){REAL(HTODA,CUresult(*)(D,const void*,size_t,P)) CUresult r=real(d,s,n,st); DONE(HTODA)}
CUresult cuStreamSynchronize(P s){REAL(SSYNC,CUresult(*)(P)) CUresult r=real(s); DONE(SSYNC)}
CUresult cuCtxSynchronize(void){REAL(CSYNC,CUresult(*)(void)) CUresult r=real(); DONE(CSYNC)}
CUresult cuModuleLoadData(P* m,const void* i){REAL(MLOAD,CUresult(*)(P*,const void*)) CUresult r=real(m,i); DONE(MLOAD)}
CUresult cuModuleLoadDataEx(P* m,const void* i,unsigned n,int* o,P* v){REAL(MLOADX,CUresult(*)(P*,const void*,unsigned,int*,P*)) CUresult r=real(m,i,n,o,v); DONE(MLOADX)}
CUresult cuMemcpyDtoD_v2(D d,D s,size_t n){REAL(DTOD,CUresult(*)(D,D,size_t)) CUresult r=real(d,s,n); DONE(DTOD)}
CUresult cuMemcpyDtoDAsync_v2(D d,D s,size_t n,P st){REAL(DTODA,CUresult(*)(D,D,size_t,P)) CUresult r=real(d,s,n,st); DONE(DTODA)}
CUresult cuMemsetD8Async(D d,unsigned char v,size_t n,P st){REAL(MEMSET,CUresult(*)(D,unsigned char,size_t,P)) CUresult r=real(d,v,n,st); DONE(MEMSET)}
CUresult cuEventRecord(P e,P s){REAL(EREC,CUresult(*)(P,P)) CUresult r=real(e,s); DONE(EREC)}
CUresult cuStreamWaitEvent(P s,P e,unsigned f){REAL(EWAIT,CUresult(*)(P,P,unsigned)) CUresult r=real(s,e,f); DONE(EWAIT)}
CUresult cuEventCreate(P* e,unsigned f){REAL(ECREATE,CUresult(*)(P*,unsigned)) CUresult r=real(e,f); DONE(ECREATE)}
CUresult cuEventDestroy_v2(P e){REAL(EDESTROY,CUresult(*)(P)) CUresult r=real(e); DONE(EDESTROY)}
CUresult cuModuleGetFunction(P* f,P m,const char* n){REAL(GETFN,CUresult(*)(P*,P,const char*)) CUresult r=real(f,m,n); if(!r){unsigned k=slot(*f); fns[k].f=*f; strncpy(fns[k].name,n,95);} DONE(GETFN)}
static double t_start;
__attribute__((constructor)) static void init(void){t_start=now();}
__attribute__((destructor)) static void fini(void){
  fprintf(stderr,"cuhook: process %.3f s\n", now()-t_start);
  for(int i=0;i<N;i++) if(cnt[i]) fprintf(stderr,"cuhook: %-22s %10llu calls %9.3f s\n",names[i],cnt[i],secs[i]);
  // the 30 kernels launched most (a name never seen is a function not got by name here)
  for(int top=0;top<30;top++){
    int best=-1; for(int i=0;i<SLOTS;i++) if(fns[i].n&&(best<0||fns[i].n>fns[best].n)) best=i;
    if(best<0) break;
    fprintf(stderr,"cuhook: kernel %-40s %10llu launches\n",fns[best].name[0]?fns[best].name:"?",fns[best].n);
    fns[best].n=0;
  }
}
