// A Vulkan layer that reports what the driver made of each compute pipeline (VK_KHR_pipeline_executable_properties:
// registers, spills, shared memory, instruction counts, whatever statistics the driver names), for
// benchmarks/pipeline_stats.py. It enables the extension on the device wgpu creates, asks for statistics on every
// vkCreateComputePipelines, and appends one line per pipeline to $WGRAPH_PIPELINE_STATS:
//   pipeline <n> spirv_words=<w> | <executable name>: <stat name>=<value>; ...
// With $WGRAPH_PIPELINE_DUMP naming a folder it also writes, per pipeline n, what the driver will show of the
// compiled code: module_<m>.spv (each shader module's SPIR-V, as naga made it), pipeline_<n>.cache (the data of
// a pipeline cache holding only that pipeline: NVIDIA's carries the machine code, which
// benchmarks/pipeline_sass.py disassembles) and pipeline_<n>_<e>_<k>.txt|.bin (the driver's internal
// representations, where it offers any).
// A development tool: one instance and one device at a time (what wgpu makes); never loaded by wgraph itself.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#define EXPORT __attribute__((visibility("default")))

static PFN_vkGetInstanceProcAddr next_gipa;
static PFN_vkGetDeviceProcAddr next_gdpa;
static PFN_vkCreateComputePipelines next_create_compute;
static PFN_vkCreateShaderModule next_create_module;
static PFN_vkGetPipelineExecutablePropertiesKHR get_props;
static PFN_vkGetPipelineExecutableStatisticsKHR get_stats;
static PFN_vkGetPipelineExecutableInternalRepresentationsKHR get_reprs;
static PFN_vkCreatePipelineCache create_cache;
static PFN_vkGetPipelineCacheData get_cache_data;
static PFN_vkDestroyPipelineCache destroy_cache;
static int modules;
static VkInstance the_instance;
static int pipelines;
static size_t last_spirv_words;  // the SPIR-V size of the latest shader module, to tell pipelines apart

static void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void report(const char *fmt, ...) {
  const char *path = getenv("WGRAPH_PIPELINE_STATS");
  FILE *f = path ? fopen(path, "a") : stderr;
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  vfprintf(f, fmt, ap);
  va_end(ap);
  if (f != stderr) fclose(f);
}

// `dir`/`name` opened for writing, or NULL when no dump folder is set.
static FILE *dump_file(const char *name) {
  const char *dir = getenv("WGRAPH_PIPELINE_DUMP");
  if (!dir) return NULL;
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return fopen(path, "wb");
}

static void dump(const char *name, const void *data, size_t size) {
  FILE *f = dump_file(name);
  if (!f) return;
  fwrite(data, 1, size, f);
  fclose(f);
}

static VkLayerInstanceCreateInfo *instance_link(const VkInstanceCreateInfo *info) {
  VkLayerInstanceCreateInfo *c = (VkLayerInstanceCreateInfo *)info->pNext;
  while (c && !(c->sType == VK_STRUCTURE_TYPE_LOADER_INSTANCE_CREATE_INFO && c->function == VK_LAYER_LINK_INFO))
    c = (VkLayerInstanceCreateInfo *)c->pNext;
  return c;
}

static VkLayerDeviceCreateInfo *device_link(const VkDeviceCreateInfo *info) {
  VkLayerDeviceCreateInfo *c = (VkLayerDeviceCreateInfo *)info->pNext;
  while (c && !(c->sType == VK_STRUCTURE_TYPE_LOADER_DEVICE_CREATE_INFO && c->function == VK_LAYER_LINK_INFO))
    c = (VkLayerDeviceCreateInfo *)c->pNext;
  return c;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateInstance(const VkInstanceCreateInfo *info,
                                                           const VkAllocationCallbacks *alloc, VkInstance *out) {
  VkLayerInstanceCreateInfo *link = instance_link(info);
  if (!link) return VK_ERROR_INITIALIZATION_FAILED;
  next_gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  PFN_vkCreateInstance create = (PFN_vkCreateInstance)next_gipa(NULL, "vkCreateInstance");
  VkResult r = create(info, alloc, out);
  if (r == VK_SUCCESS) the_instance = *out;
  return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateDevice(VkPhysicalDevice phys, const VkDeviceCreateInfo *info,
                                                         const VkAllocationCallbacks *alloc, VkDevice *out) {
  VkLayerDeviceCreateInfo *link = device_link(info);
  if (!link) return VK_ERROR_INITIALIZATION_FAILED;
  PFN_vkGetInstanceProcAddr gipa = link->u.pLayerInfo->pfnNextGetInstanceProcAddr;
  next_gdpa = link->u.pLayerInfo->pfnNextGetDeviceProcAddr;
  link->u.pLayerInfo = link->u.pLayerInfo->pNext;
  PFN_vkCreateDevice create = (PFN_vkCreateDevice)gipa(the_instance, "vkCreateDevice");

  // the extension and its feature added to what wgpu asks for
  VkDeviceCreateInfo mine = *info;
  const char **names = calloc(info->enabledExtensionCount + 1, sizeof(char *));
  memcpy(names, info->ppEnabledExtensionNames, info->enabledExtensionCount * sizeof(char *));
  names[info->enabledExtensionCount] = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  mine.enabledExtensionCount = info->enabledExtensionCount + 1;
  mine.ppEnabledExtensionNames = names;
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR feature = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR,
      .pNext = (void *)info->pNext,
      .pipelineExecutableInfo = VK_TRUE};
  mine.pNext = &feature;
  VkResult r = create(phys, &mine, alloc, out);
  if (r != VK_SUCCESS) {
    report("layer: the device refused VK_KHR_pipeline_executable_properties (%d); created without it\n", r);
    r = create(phys, info, alloc, out);
  } else {
    get_props = (PFN_vkGetPipelineExecutablePropertiesKHR)next_gdpa(*out, "vkGetPipelineExecutablePropertiesKHR");
    get_stats = (PFN_vkGetPipelineExecutableStatisticsKHR)next_gdpa(*out, "vkGetPipelineExecutableStatisticsKHR");
    get_reprs = (PFN_vkGetPipelineExecutableInternalRepresentationsKHR)next_gdpa(
        *out, "vkGetPipelineExecutableInternalRepresentationsKHR");
  }
  free(names);
  if (r == VK_SUCCESS) {
    next_create_compute = (PFN_vkCreateComputePipelines)next_gdpa(*out, "vkCreateComputePipelines");
    next_create_module = (PFN_vkCreateShaderModule)next_gdpa(*out, "vkCreateShaderModule");
    create_cache = (PFN_vkCreatePipelineCache)next_gdpa(*out, "vkCreatePipelineCache");
    get_cache_data = (PFN_vkGetPipelineCacheData)next_gdpa(*out, "vkGetPipelineCacheData");
    destroy_cache = (PFN_vkDestroyPipelineCache)next_gdpa(*out, "vkDestroyPipelineCache");
  }
  return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateShaderModule(VkDevice dev, const VkShaderModuleCreateInfo *info,
                                                               const VkAllocationCallbacks *alloc,
                                                               VkShaderModule *out) {
  last_spirv_words = info->codeSize / 4;
  char name[64];
  snprintf(name, sizeof name, "module_%d.spv", modules++);
  dump(name, info->pCode, info->codeSize);
  return next_create_module(dev, info, alloc, out);
}

// `n` zeroed output structs of `size` bytes for a Vulkan query, each with its sType (every such struct starts
// with it), as the query's second call fills them.
static void *vk_outputs(uint32_t n, size_t size, VkStructureType type) {
  char *p = calloc(n, size);
  for (uint32_t i = 0; i < n; i++) ((VkBaseOutStructure *)(p + i * size))->sType = type;
  return p;
}

static void report_pipeline(VkDevice dev, VkPipeline pipe) {
  int n = pipelines++;
  report("pipeline %d spirv_words=%zu", n, last_spirv_words);
  if (!get_props || !get_stats) {
    report(" | no statistics\n");
    return;
  }
  VkPipelineInfoKHR pinfo = {.sType = VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR, .pipeline = pipe};
  uint32_t count = 0;
  get_props(dev, &pinfo, &count, NULL);
  VkPipelineExecutablePropertiesKHR *props =
      vk_outputs(count, sizeof(*props), VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR);
  get_props(dev, &pinfo, &count, props);
  for (uint32_t e = 0; e < count; e++) {
    report(" | %s (subgroup %u):", props[e].name, props[e].subgroupSize);
    VkPipelineExecutableInfoKHR einfo = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = pipe, .executableIndex = e};
    uint32_t ns = 0;
    get_stats(dev, &einfo, &ns, NULL);
    VkPipelineExecutableStatisticKHR *st =
        vk_outputs(ns, sizeof(*st), VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR);
    get_stats(dev, &einfo, &ns, st);
    for (uint32_t i = 0; i < ns; i++) {
      switch (st[i].format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: report(" %s=%u;", st[i].name, st[i].value.b32); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: report(" %s=%lld;", st[i].name, (long long)st[i].value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: report(" %s=%llu;", st[i].name, (unsigned long long)st[i].value.u64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: report(" %s=%g;", st[i].name, st[i].value.f64); break;
        default: break;
      }
    }
    free(st);
    if (get_reprs && getenv("WGRAPH_PIPELINE_DUMP")) {
      uint32_t nr = 0;
      get_reprs(dev, &einfo, &nr, NULL);
      VkPipelineExecutableInternalRepresentationKHR *ir =
          vk_outputs(nr, sizeof(*ir), VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR);
      get_reprs(dev, &einfo, &nr, ir);  // the sizes
      for (uint32_t i = 0; i < nr; i++) ir[i].pData = malloc(ir[i].dataSize);
      get_reprs(dev, &einfo, &nr, ir);
      for (uint32_t i = 0; i < nr; i++) {
        char name[128];
        snprintf(name, sizeof name, "pipeline_%d_%u_%u.%s", n, e, i, ir[i].isText ? "txt" : "bin");
        dump(name, ir[i].pData, ir[i].isText && ir[i].dataSize ? ir[i].dataSize - 1 : ir[i].dataSize);
        report(" ir %u: %s (%zu bytes);", i, ir[i].name, ir[i].dataSize);
        free(ir[i].pData);
      }
      free(ir);
    }
  }
  free(props);
  report("\n");
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateComputePipelines(VkDevice dev, VkPipelineCache cache, uint32_t n,
                                                                   const VkComputePipelineCreateInfo *infos,
                                                                   const VkAllocationCallbacks *alloc,
                                                                   VkPipeline *out) {
  int dumping = getenv("WGRAPH_PIPELINE_DUMP") != NULL;
  VkComputePipelineCreateInfo *mine = calloc(n, sizeof(*mine));
  for (uint32_t i = 0; i < n; i++) {
    mine[i] = infos[i];
    if (get_stats) mine[i].flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
    if (get_reprs && dumping) mine[i].flags |= VK_PIPELINE_CREATE_CAPTURE_INTERNAL_REPRESENTATIONS_BIT_KHR;
  }
  // dumping: each pipeline goes through a cache of its own (empty before), whose data is then written out
  VkResult r = VK_SUCCESS;
  for (uint32_t i = 0; i < n && r == VK_SUCCESS; i++) {
    VkPipelineCache own = VK_NULL_HANDLE;
    if (dumping && create_cache) {
      VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
      if (create_cache(dev, &ci, NULL, &own) != VK_SUCCESS) own = VK_NULL_HANDLE;
    }
    r = next_create_compute(dev, own ? own : cache, 1, &mine[i], alloc, &out[i]);
    if (own) {
      size_t size = 0;
      get_cache_data(dev, own, &size, NULL);
      void *data = malloc(size);
      if (get_cache_data(dev, own, &size, data) == VK_SUCCESS) {
        char name[64];
        snprintf(name, sizeof name, "pipeline_%d.cache", pipelines);
        dump(name, data, size);
      }
      free(data);
      destroy_cache(dev, own, NULL);
    }
    if (r == VK_SUCCESS) report_pipeline(dev, out[i]);
  }
  free(mine);
  return r;
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL wgraph_stats_GetDeviceProcAddr(VkDevice dev, const char *name) {
  if (!strcmp(name, "vkCreateComputePipelines")) return (PFN_vkVoidFunction)layer_CreateComputePipelines;
  if (!strcmp(name, "vkCreateShaderModule")) return (PFN_vkVoidFunction)layer_CreateShaderModule;
  if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)wgraph_stats_GetDeviceProcAddr;
  return next_gdpa(dev, name);
}

EXPORT VKAPI_ATTR PFN_vkVoidFunction VKAPI_CALL wgraph_stats_GetInstanceProcAddr(VkInstance inst, const char *name) {
  if (!strcmp(name, "vkCreateInstance")) return (PFN_vkVoidFunction)layer_CreateInstance;
  if (!strcmp(name, "vkCreateDevice")) return (PFN_vkVoidFunction)layer_CreateDevice;
  if (!strcmp(name, "vkGetInstanceProcAddr")) return (PFN_vkVoidFunction)wgraph_stats_GetInstanceProcAddr;
  if (!strcmp(name, "vkGetDeviceProcAddr")) return (PFN_vkVoidFunction)wgraph_stats_GetDeviceProcAddr;
  if (!strcmp(name, "vkCreateComputePipelines")) return (PFN_vkVoidFunction)layer_CreateComputePipelines;
  if (!strcmp(name, "vkCreateShaderModule")) return (PFN_vkVoidFunction)layer_CreateShaderModule;
  return next_gipa(inst, name);
}
