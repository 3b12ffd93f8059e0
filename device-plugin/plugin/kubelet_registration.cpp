#include "device-plugin/plugin/kubelet_registration.h"

#include <grpcpp/grpcpp.h>

#include <chrono>

#include "device-plugin/plugin/server.h"
#include "deviceplugin_v1beta1.grpc.pb.h"

namespace gvirtus::device_plugin {

Result<void> registerWithKubelet(const std::filesystem::path& kubeletSocket,
                                 const RegistrationRequest& request, Duration timeout) {
  auto channel =
      grpc::CreateChannel("unix:" + kubeletSocket.string(), grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);

  v1beta1::RegisterRequest message;
  message.set_version(kApiVersion);
  message.set_endpoint(request.endpoint);
  message.set_resource_name(request.resource);
  message.mutable_options()->set_pre_start_required(kPreStartRequired);
  message.mutable_options()->set_get_preferred_allocation_available(kPreferredAllocationAvailable);

  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1beta1::Empty reply;
  const grpc::Status status = stub->Register(&context, message, &reply);
  if (!status.ok()) {
    return fail("register with the kubelet on " + kubeletSocket.string() + ": " +
                status.error_message() + " (gRPC code " +
                std::to_string(static_cast<int>(status.error_code())) + ")");
  }
  return {};
}

}  // namespace gvirtus::device_plugin
