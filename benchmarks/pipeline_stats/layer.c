// A Vulkan layer that reports what the driver made of each compute pipeline (VK_KHR_pipeline_executable_properties:
// registers, spills, shared memory, instruction counts, whatever statistics the driver names), for
// benchmarks/pipeline_stats.py. It enables the extension on the device wgpu creates, asks for statistics on every
// vkCreateComputePipelines, and appends one line per pipeline to $WGRAPH_PIPELINE_STATS:
//   pipeline <n> spirv_words=<w> | <executable name>: <stat name>=<value>; ...
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
  }
  free(names);
  if (r == VK_SUCCESS) {
    next_create_compute = (PFN_vkCreateComputePipelines)next_gdpa(*out, "vkCreateComputePipelines");
    next_create_module = (PFN_vkCreateShaderModule)next_gdpa(*out, "vkCreateShaderModule");
  }
  return r;
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateShaderModule(VkDevice dev, const VkShaderModuleCreateInfo *info,
                                                               const VkAllocationCallbacks *alloc,
                                                               VkShaderModule *out) {
  last_spirv_words = info->codeSize / 4;
  return next_create_module(dev, info, alloc, out);
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
  VkPipelineExecutablePropertiesKHR *props = calloc(count, sizeof(*props));
  for (uint32_t i = 0; i < count; i++) props[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
  get_props(dev, &pinfo, &count, props);
  for (uint32_t e = 0; e < count; e++) {
    report(" | %s (subgroup %u):", props[e].name, props[e].subgroupSize);
    VkPipelineExecutableInfoKHR einfo = {
        .sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR, .pipeline = pipe, .executableIndex = e};
    uint32_t ns = 0;
    get_stats(dev, &einfo, &ns, NULL);
    VkPipelineExecutableStatisticKHR *st = calloc(ns, sizeof(*st));
    for (uint32_t i = 0; i < ns; i++) st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
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
  }
  free(props);
  report("\n");
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_CreateComputePipelines(VkDevice dev, VkPipelineCache cache, uint32_t n,
                                                                   const VkComputePipelineCreateInfo *infos,
                                                                   const VkAllocationCallbacks *alloc,
                                                                   VkPipeline *out) {
  VkComputePipelineCreateInfo *mine = calloc(n, sizeof(*mine));
  for (uint32_t i = 0; i < n; i++) {
    mine[i] = infos[i];
    if (get_stats) mine[i].flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  }
  VkResult r = next_create_compute(dev, cache, n, mine, alloc, out);
  free(mine);
  if (r == VK_SUCCESS)
    for (uint32_t i = 0; i < n; i++) report_pipeline(dev, out[i]);
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
