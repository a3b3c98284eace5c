"""The project's URLs: the admin, the order form, and the skiplock console behind Django's login."""

from django.contrib import admin
from django.urls import include, path
from orders import views

from skiplock.webapp.integrations.django import add_admin_link, console_urls, staff_rule

console_rule = staff_rule(admin_permission="orders.operate_jobs")
add_admin_link(admin.site, console_rule)  # a "Skiplock > Job queue" entry on the admin's index

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),  # the shop's own login page
    path("orders/", views.place_order),
    # Staff may look at the queue; superusers, and staff with the orders.operate_jobs permission,
    # may retry and purge. Someone not logged in is sent to LOGIN_URL.
    path("jobs/", console_urls(console_rule)),
]
