"""One business table: an order, and whether its confirmation email went out."""

from django.db import models


class Order(models.Model):
    item = models.CharField(max_length=100)
    confirmed = models.BooleanField(default=False)  # set by the worker's handler

    class Meta:
        # who may retry and purge jobs in the console (see shop/urls.py)
        permissions = [("operate_jobs", "Can retry and purge jobs in the skiplock console")]
