#include "common/kube/client.h"

#include <string>
#include <utility>

#include "common/kube/client_impl.h"

// The verbs of a KubeClient (get, list, create, update, patch, delete, watch): each builds
// its request for a resource's path and hands it to the Impl.
namespace gvirtus {
namespace {

using kube_detail::QueryParams;
using nlohmann::json;

}  // namespace

Result<json> KubeClient::get(const KubeResource& resource, const std::string& ns,
                             const std::string& name) {
  return impl_->sendJson({"get", "GET", resource.objectPath(ns, name), {}, {}, {}});
}

Result<ListPage> KubeClient::list(const KubeResource& resource, const std::string& ns,
                                  const ListOptions& options) {
  QueryParams query;
  if (!options.labelSelector.empty()) {
    query.emplace_back("labelSelector", options.labelSelector);
  }
  if (!options.fieldSelector.empty()) {
    query.emplace_back("fieldSelector", options.fieldSelector);
  }
  if (options.limit > 0) {
    query.emplace_back("limit", std::to_string(options.limit));
  }
  if (!options.continueToken.empty()) {
    query.emplace_back("continue", options.continueToken);
  }
  if (!options.resourceVersion.empty()) {
    query.emplace_back("resourceVersion", options.resourceVersion);
  }
  const std::string path = resource.collectionPath(ns);
  auto body = impl_->sendJson({"list", "GET", path, std::move(query), {}, {}});
  if (!body) {
    return fail(body.error());
  }
  if (!body->is_object()) {
    return fail("GET " + path + ": the list is not a JSON object");
  }
  ListPage page;
  const json& metadata = body->value("metadata", json::object());
  if (metadata.is_object()) {
    page.resourceVersion = metadata.value("resourceVersion", std::string());
    page.continueToken = metadata.value("continue", std::string());
  }
  // List items carry no kind or apiVersion; fill them in from the list's, so items can be
  // written back or told apart like objects from get and watch.
  std::string kind = body->value("kind", std::string());
  if (kind.ends_with("List")) {
    kind.resize(kind.size() - 4);
  }
  const std::string apiVersion = body->value("apiVersion", std::string());
  auto items = body->find("items");
  if (items != body->end() && items->is_array()) {
    page.items.reserve(items->size());
    for (auto& item : *items) {
      if (item.is_object()) {
        if (!kind.empty() && !item.contains("kind")) {
          item["kind"] = kind;
        }
        if (!apiVersion.empty() && !item.contains("apiVersion")) {
          item["apiVersion"] = apiVersion;
        }
      }
      page.items.push_back(std::move(item));
    }
  } else if (items != body->end() && !items->is_null()) {
    return fail("GET " + path + ": items is not a list");
  }
  return page;
}

Result<ListPage> KubeClient::listAll(const KubeResource& resource, const std::string& ns,
                                     ListOptions options) {
  if (options.limit <= 0) {
    options.limit = 500;
  }
  auto first = list(resource, ns, options);
  if (!first) {
    return fail(first.error());
  }
  ListPage all = std::move(*first);
  // A continued list must not name a resourceVersion: the token carries it.
  options.resourceVersion.clear();
  while (!all.continueToken.empty()) {
    options.continueToken = all.continueToken;
    auto next = list(resource, ns, options);
    if (!next) {
      return fail(next.error());
    }
    for (auto& item : next->items) {
      all.items.push_back(std::move(item));
    }
    all.continueToken = next->continueToken;
  }
  return all;
}

namespace {

QueryParams writeQuery(const WriteOptions& options) {
  QueryParams query;
  if (options.dryRun) {
    query.emplace_back("dryRun", "All");
  }
  if (!options.fieldManager.empty()) {
    query.emplace_back("fieldManager", options.fieldManager);
  }
  return query;
}

std::string withSubresource(std::string path, const WriteOptions& options) {
  if (!options.subresource.empty()) {
    path += "/" + options.subresource;
  }
  return path;
}

}  // namespace

Result<json> KubeClient::create(const KubeResource& resource, const std::string& ns,
                                const json& object, const WriteOptions& options) {
  QueryParams query = writeQuery(options);
  std::string path = resource.collectionPath(ns);
  if (!options.subresource.empty()) {
    // POST to a subresource of a named object (pods/NAME/eviction, pods/NAME/binding).
    std::string name;
    if (object.is_object()) {
      const json& metadata = object.value("metadata", json::object());
      if (metadata.is_object()) {
        name = metadata.value("name", std::string());
      }
    }
    if (name.empty()) {
      return fail("POST " + path + ": creating a subresource needs metadata.name");
    }
    path = withSubresource(resource.objectPath(ns, name), options);
  }
  return impl_->sendJson(
      {"create", "POST", path, std::move(query), object.dump(), "application/json"});
}

Result<json> KubeClient::update(const KubeResource& resource, const std::string& ns,
                                const std::string& name, const json& object,
                                const WriteOptions& options) {
  QueryParams query = writeQuery(options);
  return impl_->sendJson({"update", "PUT", withSubresource(resource.objectPath(ns, name), options),
                          std::move(query), object.dump(), "application/json"});
}

Result<json> KubeClient::patch(const KubeResource& resource, const std::string& ns,
                               const std::string& name, PatchType type, const std::string& body,
                               const WriteOptions& options) {
  const std::string path = withSubresource(resource.objectPath(ns, name), options);
  std::string contentType;
  switch (type) {
    case PatchType::Merge:
      contentType = "application/merge-patch+json";
      break;
    case PatchType::StrategicMerge:
      contentType = "application/strategic-merge-patch+json";
      break;
    case PatchType::Json:
      contentType = "application/json-patch+json";
      break;
    case PatchType::Apply:
      contentType = "application/apply-patch+yaml";  // JSON is valid YAML
      break;
  }
  if (type == PatchType::Apply && options.fieldManager.empty()) {
    return fail("PATCH " + path + ": server-side apply needs a field manager");
  }
  if (type != PatchType::Apply && options.force) {
    return fail("PATCH " + path + ": force is only valid with server-side apply");
  }
  QueryParams query = writeQuery(options);
  if (options.force) {
    query.emplace_back("force", "true");
  }
  return impl_->sendJson({"patch", "PATCH", path, std::move(query), body, contentType});
}

Result<void> KubeClient::remove(const KubeResource& resource, const std::string& ns,
                                const std::string& name, const std::string& uid) {
  std::string body;
  std::string contentType;
  if (!uid.empty()) {
    body = json{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"preconditions", {{"uid", uid}}}}
               .dump();
    contentType = "application/json";
  }
  auto response = impl_->send(
      {"delete", "DELETE", resource.objectPath(ns, name), {}, std::move(body), contentType});
  if (!response) {
    return fail(response.error());
  }
  return {};
}

Result<void> KubeClient::watch(const KubeResource& resource, const std::string& ns,
                               const WatchOptions& options,
                               const std::function<bool(const WatchEvent&)>& onEvent,
                               std::stop_token stop) {
  return impl_->watch(resource.collectionPath(ns), options, onEvent, std::move(stop));
}

}  // namespace gvirtus
